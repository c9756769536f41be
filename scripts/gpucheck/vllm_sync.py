"""vLLM as the learner's sampling engine: it generates, and after an optimizer step its
log-probs are the updated policy's (the weight sync reached every tensor it uses), which the
step moved by far more than the engine/trainer gap.

Log-probs, not greedy tokens: a sync that missed a tensor (the tied head, say) can leave the
argmax unchanged while the distribution is not the trainer's. They are compared at every
position of the prompt and the sampled completion (each position's log-prob of its token,
which depends on every logit there through the softmax's normaliser). After the step, a
change to the tied input embedding and output head that the engine must see: before the sync
the engine is far from the policy, after it within ``TOLERANCE`` of that distance (bf16 on a
GPU rounds; on CPU in fp32 the gap is float noise, about 1e-5).
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import torch

#: The engine after a sync is within this share of how far the change moved the policy.
TOLERANCE = 0.1
#: The scale of the noise added to the tied embedding and head (their init's std is 0.02).
EMBEDDING_NOISE = 0.05


def available() -> str | None:
    """None where vLLM imports, else why not (one line)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # a broken install says so in one line, the check goes on
        return f"vLLM does not import: {type(exc).__name__}: {str(exc)[:160]}"
    return None


def _engine_logprobs(engine: Any, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """The engine's log-prob of every token of ``prompt + completion`` but the first, after
    the tokens before it (its prompt log-probs)."""
    from vllm import SamplingParams

    # The adapter too, where the engine applies the policy's LoRA itself.
    out = engine.llm.generate([{"prompt_token_ids": prompt + completion}],
                              SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False),
                              use_tqdm=False,
                              lora_request=getattr(engine, "_lora_request", None))[0]
    ids = prompt + completion
    return torch.tensor([out.prompt_logprobs[i][ids[i]].logprob for i in range(1, len(ids))])


def _policy_logprobs(model: Any, prompt: list[int], completion: list[int]) -> torch.Tensor:
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + completion], device=device)
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16,
                                         enabled=device.type == "cuda"):
        logits = model(ids).logits.float()[0, :-1]
    return logits.log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0].cpu()


def every_position_gap(engine: Any, policy: Any, ids: list[int]) -> float:
    """The largest |engine - policy| log-prob of each token of ``ids`` after the ones before
    it, over every position but the first (the prompt's and the completion's alike)."""
    return float((_engine_logprobs(engine, ids[:1], ids[1:])
                  - _policy_logprobs(policy, ids[:1], ids[1:])).abs().max())


@torch.no_grad()
def _move_embeddings(policy: Any) -> None:
    """Noise on the input embedding, which the tied output head shares: a change the engine
    sees only if the sync reaches both (vLLM keeps its own packed head on CPU)."""
    torch.manual_seed(0)
    for name, p in policy.named_parameters():
        if name.endswith("embed_tokens.weight"):
            p.add_(torch.randn_like(p) * EMBEDDING_NOISE)


def check(folder: Path, device: torch.device, *, lr: float = 3e-2) -> dict[str, Any]:
    """One GRPO step of the synthetic task with ``--rollout-engine vllm``; the engine's and the
    policy's log-probs of the step's own sampled completions, before and after the step."""
    from learner.model import load_model, load_tokenizer
    from learner.training.trainer import GRPOTrainer
    from scripts.gpucheck import learning, synthetic

    if not (folder / "config.json").is_file():
        synthetic.save_model(folder)
    config = learning.trainer_config(folder, device, steps=2, lr=lr)
    config.rollout_engine = "vllm"
    config.validate()
    tokenizer = load_tokenizer(str(folder))
    trainer = GRPOTrainer(config, model=load_model(str(folder)), tokenizer=tokenizer,
                          env=synthetic.SayWordEnv())
    try:
        engine = trainer.engine
        samples = trainer.collect()  # the engine generates
        roll = samples.rollout
        prompt = roll.prompt_ids[0][roll.prompt_mask[0].bool()].cpu().tolist()
        rows = roll.completion_ids.cpu().tolist()
        lengths = roll.completion_mask.sum(-1).cpu().tolist()
        probe = [t for row, n in zip(rows, lengths, strict=True) for t in row[:n]][:32]
        if not probe:
            raise RuntimeError("the engine generated no tokens")
        before = copy.deepcopy(trainer.policy)
        metrics = trainer.train_step().metrics  # update, then the sync to the engine
        if metrics.get("skipped"):
            raise RuntimeError("the step had no signal to train on")
        engine_lp = _engine_logprobs(engine, prompt, probe)
        after_lp = _policy_logprobs(trainer.policy, prompt, probe)
        before_lp = _policy_logprobs(before, prompt, probe)
        _move_embeddings(trainer.policy)
        moved_lp = _policy_logprobs(trainer.policy, prompt, probe)
        stale_lp = _engine_logprobs(engine, prompt, probe)  # not synced yet
        trainer.sync_engine()
        synced_lp = _engine_logprobs(engine, prompt, probe)
    finally:
        trainer.close()
    gap = float((engine_lp - after_lp).abs().max())
    moved = float((after_lp - before_lp).abs().max())
    stale = float((stale_lp - moved_lp).abs().max())
    synced_gap = float((synced_lp - moved_lp).abs().max())
    return {"engine": type(engine).__name__, "generated_tokens": int(sum(lengths)),
            "positions": len(after_lp), "probe_tokens": len(probe),
            "engine_vs_policy_max": round(gap, 5), "step_moved_max": round(moved, 5),
            "embedding_stale_max": round(stale, 5), "embedding_synced_max": round(synced_gap, 5),
            "tolerance": TOLERANCE,
            "synced": gap < TOLERANCE * moved and synced_gap < TOLERANCE * stale}
