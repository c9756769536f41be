"""Grouped-query attention in the decoding loop (``kernels.gqa_sdpa``): the same logits, tokens
and log-probs as transformers' ``sdpa``, without its per-head copies of the keys, and only
while decoding."""

import contextlib

import torch
import transformers.integrations.sdpa_attention as sdpa_module
from transformers import AutoConfig, AutoModelForCausalLM

import learner.sampling.decoding as decoding
from learner.model import chat_prompt, load_model, resolve
from learner.sampling.engine import HFEngine
from learner.sampling.kernels.gqa_sdpa import GQA_SDPA, gqa_attention
from learner.sampling.rollout import generate
from tests import learner_helpers as h


def _gqa_model(tmp_path):
    """A tiny random model with 4 query heads sharing 2 key-value heads, loaded with
    ``from_pretrained`` as users load one."""
    config = AutoConfig.from_pretrained(resolve(None))
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(tmp_path)
    model = load_model(str(tmp_path))
    assert model.config._attn_implementation == "sdpa"
    return model


def test_padded_logits_are_sdpas_bitwise(tmp_path):
    model = _gqa_model(tmp_path)
    ids = torch.randint(0, 1000, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding: transformers' sdpa repeats the keys here
    mask[2, :2] = 0
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask).logits
        with gqa_attention(model):
            assert model.config._attn_implementation == GQA_SDPA
            grouped = model(input_ids=ids, attention_mask=mask).logits
    assert model.config._attn_implementation == "sdpa"  # restored on the way out
    assert torch.equal(plain[mask.bool()], grouped[mask.bool()])


def test_decoding_reads_the_keys_once_and_samples_what_sdpa_samples(tmp_path, monkeypatch):
    model, tok = _gqa_model(tmp_path), h.tokenizer()
    prompts = [chat_prompt(tok, q) for q in ("What is 2 + 3?", "Name a prime. Think.",
                                               "What is 7 * 6? Think step by step.")]
    repeats: list[int] = []
    repeat_kv = sdpa_module.repeat_kv

    def counted(*a, **k):
        repeats.append(1)
        return repeat_kv(*a, **k)

    monkeypatch.setattr(sdpa_module, "repeat_kv", counted)
    torch.manual_seed(0)
    grouped = generate(HFEngine(model), tok, prompts, group_size=2, max_new_tokens=10)
    assert repeats == []  # no copy of the keys per query head while decoding
    assert model.config._attn_implementation == "sdpa"
    monkeypatch.setattr(decoding, "gqa_attention", lambda m: contextlib.nullcontext())
    torch.manual_seed(0)
    plain = generate(HFEngine(model), tok, prompts, group_size=2, max_new_tokens=10)
    assert repeats  # transformers' own path repeats them
    assert torch.equal(grouped.completion_ids, plain.completion_ids)
    assert torch.equal(grouped.logprobs, plain.logprobs)
