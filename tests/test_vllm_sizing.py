"""The vLLM engine sized from the step (``vllm_sizing``), and the weight sync's buckets: what a
GPU run starts the engine with, and how much of a ZeRO-3 model is whole at once, checked on
CPU without starting vLLM (``tests/test_vllm_engine.py`` runs the real engine)."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen2Config

from learner.config import Config
from learner.sampling.vllm_engine import checkpoint_weights, weight_buckets
from learner.stage_config import EngineConfig
from learner.training import vllm_sizing
from tests import learner_helpers as h

SHAPES = Path(__file__).resolve().parents[1] / "scripts/gpucheck/shapes"
QWEN_1_5B_PARAMS = 1_543_714_304  # tied embeddings counted once


def _engine(**flags: Any) -> EngineConfig:
    """The engine's part of a config with ``flags``."""
    return EngineConfig.of(Config(**flags))


def _qwen(name: str) -> Qwen2Config:
    fields = {k: v for k, v in json.loads((SHAPES / name).read_text()).items()
              if not k.startswith("_")}
    return Qwen2Config(**fields)


def test_the_issue_step_sizes_the_engine_to_its_rows():
    """P=64, G=8, T=512, prompts of 150 tokens at the 1.5B shape (issue 45's paper target)."""
    c = _engine(prompts_per_step=64, group_size=8, max_new_tokens=512)
    size = vllm_sizing.size_engine(c, _qwen("qwen2.5-1.5b.json"), params=QWEN_1_5B_PARAMS,
                                   prompt_tokens=150, completion_tokens=512, world=1,
                                   multi_turn=False, card_bytes=80e9)
    # 2 x 150 + 512 = 812, up to a multiple of 256; every row of the step at once.
    assert (size.max_model_len, size.max_num_seqs) == (1024, 512)
    assert size.derived == ("max_model_len", "max_num_seqs", "gpu_memory_utilization")
    # By hand: bf16 weights 2 x 1.544e9 = 3.09 GB; the KV cache of 512 rows of 662 tokens at
    # 2 (K, V) x 28 layers x 2 KV heads x 128 x 2 bytes = 28,672 bytes a token = 9.72 GB.
    weights, kv = 2 * QWEN_1_5B_PARAMS, 512 * 662 * 28_672
    assert size.need_bytes >= weights + vllm_sizing.KV_MARGIN * kv \
        + vllm_sizing.ENGINE_OVERHEAD_BYTES
    assert size.need_bytes <= weights + 1.5 * kv + vllm_sizing.ENGINE_OVERHEAD_BYTES
    # ... which an 80 GB card holds at the issue's 0.25, leaving the trainer 60 GB.
    assert 0.2 <= size.gpu_memory_utilization <= 0.25
    assert size.gpu_memory_utilization == math.ceil(100 * size.need_bytes / 80e9) / 100
    record = json.loads(json.dumps(size.record()))  # config.json's provenance takes it
    assert record["max_num_seqs"] == 512 and record["card_bytes"] == 80e9
    assert size.line().startswith("vLLM engine sized (derived from the step): max_model_len "
                                  "1024 (2 x longest prompt 150 + T 512), max_num_seqs 512")


def test_what_the_user_set_stays_and_the_derived_values_follow_the_processes():
    model = _qwen("qwen2.5-0.5b.json")
    set_ = _engine(prompts_per_step=64, group_size=8, vllm_max_model_len=4096,
                   vllm_max_num_seqs=100, vllm_gpu_memory_utilization=0.4)
    size = vllm_sizing.size_engine(set_, model, params=494_032_768, prompt_tokens=150,
                                   completion_tokens=512, world=1, multi_turn=False,
                                   card_bytes=80e9)
    assert (size.max_model_len, size.max_num_seqs, size.gpu_memory_utilization) == \
        (4096, 100, 0.4)
    assert size.derived == () and "as set" in size.line()
    # Each process's engine holds its share: ceil(9 / 2) = 5 prompts x 8 rows.
    split = vllm_sizing.size_engine(_engine(prompts_per_step=9, group_size=8), model,
                                    params=494_032_768, prompt_tokens=100,
                                    completion_tokens=64, world=2, multi_turn=False)
    assert split.max_num_seqs == 40 and split.max_model_len == 512  # 264 up to 512
    assert split.gpu_memory_utilization == 0.3  # on CPU no share is derived (not used)
    # At most MAX_NUM_SEQS rows; the model's own context length caps max_model_len.
    big = vllm_sizing.size_engine(_engine(prompts_per_step=256, group_size=16), model,
                                  params=494_032_768, prompt_tokens=20_000,
                                  completion_tokens=4096, world=1, multi_turn=False)
    assert big.max_num_seqs == vllm_sizing.MAX_NUM_SEQS
    assert big.max_model_len == model.max_position_embeddings == 32768
    # Episodes grow by tool outputs of no known bound: the model's context length stays.
    multi = vllm_sizing.size_engine(_engine(), model, params=1, prompt_tokens=100,
                                    completion_tokens=64, world=1, multi_turn=True)
    assert multi.max_model_len is None and "max_model_len" not in multi.derived


def test_a_max_model_len_under_a_prompt_and_its_budget_is_refused_before_the_engine_starts(
        tmp_path, capsys):
    """It was refused at step 1's decode, after the engine's half-minute start, in a 26-frame
    traceback."""
    from learner import run
    from learner.env_setup import SetupError

    model = _qwen("qwen2.5-0.5b.json")
    fits = vllm_sizing.size_engine(_engine(vllm_max_model_len=166), model, params=1,
                                   prompt_tokens=150, completion_tokens=16, world=1,
                                   multi_turn=False)
    assert fits.max_model_len == 166 and fits.derived[0] == "max_num_seqs"
    with pytest.raises(SetupError, match=r"--vllm-max-model-len 165 is under the longest "
                       r"prompt seen \(150 tokens\) plus --max-new-tokens 16: give 166 or more"):
        vllm_sizing.size_engine(_engine(vllm_max_model_len=165), model, params=1,
                                prompt_tokens=150, completion_tokens=16, world=1,
                                multi_turn=False)
    code = run.main(["--env", "grpo/MathExact-v0", "--model", str(h.save_tiny(tmp_path / "m")),
                     "--rollout-engine", "vllm", "--vllm-max-model-len", "10",
                     "--max-new-tokens", "16", "--steps", "1", "--no-eval", "--no-progress",
                     "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("error: --vllm-max-model-len 10 is under the "
                                            "longest prompt seen"), err[-3:]


def test_the_flags_take_zero_as_derived_and_refuse_a_share_out_of_range():
    from learner.config import parse_config

    c = parse_config(["--vllm-max-num-seqs", "64", "--no-vllm-sleep"])
    assert c.vllm_max_num_seqs == 64 and c.vllm_sleep is False
    assert Config().vllm_gpu_memory_utilization == 0 and Config().vllm_sleep is True
    for bad in ("1", "-0.1", "nan"):
        with pytest.raises(SystemExit):
            parse_config(["--vllm-gpu-memory-utilization", bad])
    with pytest.raises(SystemExit):
        parse_config(["--vllm-max-num-seqs", "-1"])


def test_weight_buckets_by_hand():
    assert weight_buckets([4, 4, 10, 1, 1, 3], 8) == [[0, 1], [2], [3, 4, 5]]
    assert weight_buckets([], 8) == []
    assert weight_buckets([9], 8) == [[0]]  # larger than a bucket: alone


def test_a_zero3_sync_gathers_one_bucket_at_a_time_and_sends_the_engines_precision():
    model = h.model()
    whole = {n: p.detach().clone() for n, p in model.named_parameters(remove_duplicate=False)}
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    bucket = largest  # the embedding (tied to the head): the rest in a few buckets
    gather = h.Partitioned(model)
    got = []
    for name, value in checkpoint_weights(model, dtype=torch.bfloat16, gather=gather,
                                          bucket_bytes=bucket):
        got.append((name, value))  # held, as a loader may: copies outlive their bucket
        assert gather.live <= bucket  # never more than one bucket whole
    assert gather.live == 0 and 1 <= gather.peak <= bucket
    assert gather.gathers >= 3  # the model went over in several buckets, not at once
    assert [n for n, _ in got] == list(whole)  # every name, the tied head's too
    for name, value in got:
        assert value.dtype == torch.bfloat16
        assert torch.equal(value, whole[name].to(torch.bfloat16)), name
    # The parameters are partitioned again: nothing of the model stayed whole.
    assert all(p.numel() == 0 for p in model.parameters())
