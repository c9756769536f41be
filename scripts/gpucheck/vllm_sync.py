"""vLLM as the learner's sampling engine: it generates, and after an optimizer step its
log-probs are the updated policy's (the weight sync reached every tensor it uses), which the
step moved by far more than the engine/trainer gap.

Log-probs, not greedy tokens: a sync that missed a tensor (the tied head, say) can leave the
argmax unchanged while the distribution is not the trainer's.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import torch


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
    """The engine's log-probs of ``completion`` after ``prompt`` (its prompt log-probs)."""
    from vllm import SamplingParams

    out = engine.llm.generate([{"prompt_token_ids": prompt + completion}],
                              SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False),
                              use_tqdm=False)[0]
    ids = prompt + completion
    return torch.tensor([out.prompt_logprobs[i][ids[i]].logprob
                         for i in range(len(prompt), len(ids))])


def _policy_logprobs(model: Any, prompt: list[int], completion: list[int]) -> torch.Tensor:
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + completion], device=device)
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16,
                                         enabled=device.type == "cuda"):
        logits = model(ids).logits.float()[0, len(prompt) - 1:-1]
    return logits.log_softmax(-1).gather(-1, ids[0, len(prompt):, None])[:, 0].cpu()


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
    finally:
        trainer.close()
    gap = float((engine_lp - after_lp).abs().max())
    moved = float((after_lp - before_lp).abs().max())
    return {"engine": type(engine).__name__, "generated_tokens": int(sum(lengths)),
            "probe_tokens": len(probe), "engine_vs_policy_max": round(gap, 5),
            "step_moved_max": round(moved, 5), "synced": gap < 0.1 * moved}
