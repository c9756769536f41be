"""The vLLM components of a step at a model's shape (docs/gpu.md's paper derivation): the engine
sized from the step as a run sizes it (``vllm_sizing``), its decode rate with every row of the
step at once, and the seconds of a sleep, a wake and a weight sync from the trainer's fp32
policy, as ``GRPOTrainer`` does them each step.

Random-init weights: the rows rarely sample an EOS, so nearly every row runs to its budget
(the all-T column of the derivation); the rate counts the tokens actually decoded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free_gb(device: torch.device) -> float | None:
    return torch.cuda.mem_get_info(device)[0] / 1e9 if device.type == "cuda" else None


def components(folder: Path, device: torch.device, *, prompts: int = 64, group: int = 8,
               prompt_tokens: int = 150, tokens: int = 512) -> dict[str, Any]:
    """Engine size, start, decode, sleep, wake and sync figures for the model in ``folder``
    at P = ``prompts``, G = ``group``, prompts of ``prompt_tokens``, budget ``tokens``."""
    from transformers import AutoConfig

    from learner.config import Config
    from learner.model import load_model
    from learner.sampling.vllm_engine import VLLMEngine
    from learner.stage_config import EngineConfig
    from learner.training import vllm_sizing

    c = Config(prompts_per_step=prompts, group_size=group, max_new_tokens=tokens)
    model_config = AutoConfig.from_pretrained(folder)
    policy = load_model(str(folder)).to(device)  # fp32, as the trainer holds it
    card = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else 0
    size = vllm_sizing.size_engine(
        EngineConfig.of(c), model_config, params=sum(p.numel() for p in policy.parameters()),
        prompt_tokens=prompt_tokens, completion_tokens=tokens, world=1, multi_turn=False,
        card_bytes=card)
    engine = VLLMEngine(str(folder), device=device, max_model_len=size.max_model_len,
                        max_num_seqs=size.max_num_seqs,
                        gpu_memory_utilization=size.gpu_memory_utilization, sleep=True)
    try:
        vocab = int(model_config.vocab_size)
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab - 1, (prompts, prompt_tokens), generator=gen)
        mask = torch.ones_like(ids)
        eos = torch.tensor([vocab - 1])  # one id of the vocabulary: rows run to the budget
        budgets = torch.full((prompts * group,), tokens)
        engine.decode(ids[:1], mask[:1], budgets=budgets[:group].clamp(max=8), eos=eos,
                      pad_id=0, repeat=group)  # warm-up
        _sync(device)
        t0 = time.perf_counter()
        out = engine.decode(ids, mask, budgets=budgets, eos=eos, pad_id=0, repeat=group)
        _sync(device)
        decode_s = time.perf_counter() - t0
        awake = _free_gb(device)
        engine.sleep()
        asleep = _free_gb(device)
        engine.sync(policy)  # wakes the weights, loads, wakes the KV cache
        sync_sleeping_s, wake_s = engine.sync_s, engine.wake_s
        engine.sync(policy)  # awake: the load alone
        figures = {
            "engine_size": size.record(), "sleeps": engine.sleeps,
            "start_s": round(engine.start_s, 2), "rows": prompts * group,
            "prompt_tokens": prompt_tokens, "budget": tokens,
            "decoded_tokens": int(out.decoded), "decode_s": round(decode_s, 3),
            "decode_tokens_per_s": round(out.decoded / decode_s),
            "sleep_s": round(engine.sleep_s, 3), "wake_s": round(wake_s, 3),
            "sync_s": round(engine.sync_s, 3),
            "sync_after_sleep_s": round(sync_sleeping_s, 3),  # the wake included
            "freed_gb_by_sleep": None if awake is None else round(asleep - awake, 2),
        }
    finally:
        engine.close()
        del policy
    return figures
