"""Held-out evaluation on an env's test split: greedy accuracy and unbiased pass@k.

``evaluate`` is the building block for both the trainer's periodic ``eval/*`` metrics and
standalone reports: it takes a model, its tokenizer and an env, and returns per-task records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.base import TaskEnv
from learner.model import chat_prompt
from learner.rollout import generate
from learner.scoring import score_all
from tasks import Task


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass
class EvalResult:
    """One record per evaluated task: its id, the greedy completion, correctness, sample counts."""

    records: list[dict[str, Any]] = field(default_factory=list)
    k: int = 1

    def metrics(self) -> dict[str, float]:
        scored = [r for r in self.records if not r["infra_error"]]
        out: dict[str, float] = {"n": float(len(scored))}
        if not scored:
            return out
        out["accuracy"] = sum(r["correct"] for r in scored) / len(scored)
        out["reward"] = sum(r["reward"] for r in scored) / len(scored)
        # Full marks: correct *and* every other component satisfied (for MathExact: boxed).
        out["full_marks"] = sum(
            bool(r["correct"]) and all(v >= 1.0 for v in r["components"].values())
            for r in scored) / len(scored)
        for name in sorted({k for r in scored for k in r["components"]}):
            out[f"reward/{name}"] = sum(r["components"].get(name, 0.0) for r in scored) / len(
                scored)
        if self.k > 1:
            out[f"pass@{self.k}"] = sum(
                pass_at_k(r["samples"], r["samples_correct"], self.k) for r in scored
            ) / len(scored)
        return out


def heldout_tasks(env: TaskEnv, size: int = 0, split: str = "test") -> list[Task]:
    """The first ``size`` tasks of the held-out split (all of it when ``size`` is 0)."""
    total = env.pack.size(split)
    if total is None:
        if not size:
            raise ValueError(f"split '{split}' is unbounded: give an evaluation size")
        total = size
    n = min(size, total) if size else total
    return [env.pack.task_at(split, i) for i in range(n)]


test_tasks = heldout_tasks  # the first name of this function; other modules still import it


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    env: TaskEnv,
    tasks: list[Task],
    *,
    max_new_tokens: int,
    k: int = 1,
    samples: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    workers: int = 16,
) -> EvalResult:
    """Greedy-decode every task once; with ``k > 1`` also sample ``samples`` (default ``k``)."""
    n_samples = samples or k
    result = EvalResult(k=k)
    for start in range(0, len(tasks), batch_size):
        chunk = tasks[start:start + batch_size]
        prompts = [chat_prompt(tokenizer, env.prompt(t)) for t in chunk]
        greedy = generate(model, tokenizer, prompts, group_size=1,
                          max_new_tokens=max_new_tokens, greedy=True)
        graded = score_all(env, chunk, greedy.texts, workers)
        sampled_correct = [0] * len(chunk)
        if k > 1:
            roll = generate(model, tokenizer, prompts, group_size=n_samples,
                            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
            repeated = [t for t in chunk for _ in range(n_samples)]
            graded_samples = score_all(env, repeated, roll.texts, workers)
            for i, ok in enumerate(graded_samples.passed):
                sampled_correct[i // n_samples] += int(ok)
        for i, task in enumerate(chunk):
            result.records.append({
                "task_id": task.id,
                "completion": greedy.texts[i],
                "correct": graded.passed[i],
                "reward": graded.rewards[i],
                "components": graded.components[i],
                "infra_error": graded.infra_error[i],
                "samples": n_samples if k > 1 else 1,
                "samples_correct": sampled_correct[i] if k > 1 else int(graded.passed[i]),
            })
    return result
