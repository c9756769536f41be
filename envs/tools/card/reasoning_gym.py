"""One reasoning-gym task's report card and padding check, as the row ``cards.json`` keeps
(``benchmarks/reasoning_gym_cards.py`` runs it for every task; ``python -m envs list`` reads
the file through ``envs.domains.reasoning_gym.catalogue``)."""

from __future__ import annotations

from typing import Any

from envs.base import make_task_env
from envs.domains.reasoning_gym.catalogue import NOT_OFFERED, padded
from envs.grading import grade_batch
from envs.tools.card import run_card


def run_task_card(task: str, *, n_tasks: int = 30, seed: int = 0) -> dict[str, Any]:
    """One task's card (default config, its test split) and the padding check, as JSON."""
    if task in NOT_OFFERED:
        return {"ok": False, "kind": "-", "reason": NOT_OFFERED[task], "summary": "",
                "failed": [], "padded_paid": 0, "padded": 0}
    env = make_task_env("grpo/ReasoningGym-v0", task=task, split="test")
    try:
        card = run_card(env, n_tasks=n_tasks, seed=seed, corpus_lines=[])
        tasks = [env.pack.task_at("test", i) for i in range(min(n_tasks, env.pack.size("test") or 0))]
        golds = [t["answer"] for t in tasks]
        pairs = []
        for i, (t, gold) in enumerate(zip(tasks, golds, strict=True)):
            if gold is None:
                continue
            others = [g for g in golds[i + 1:] + golds[:i] if g is not None and g != gold]
            for completion in padded(env, gold, others).values():
                pairs.append((t, completion))
        scored = grade_batch(env, [t for t, _ in pairs], [c for _, c in pairs])
        paid = [r for r in scored if r[0] > 0]
        failed = [r.check.id for r in card.results if r.status == "fail"]
        reasons = []
        if all(g is None for g in golds):
            reasons.append("no gold answers (the generator gives none: the oracle is unchecked)")
        for r in card.results:
            if r.status == "fail":
                reasons.append(f"{r.check.id} ({_metrics(r.metrics)})")
        if paid:
            reasons.append(f"padded golds paid ({len(paid)}/{len(pairs)})")
        return {"ok": not reasons, "kind": getattr(env, "kind", "-"), "reason": "; ".join(reasons),
                "summary": card.summary(), "failed": failed, "pack_version":
                env.pack.pack_version, "padded_paid": len(paid), "padded": len(pairs),
                "card": card.to_json()}
    finally:
        env.close()


def _metrics(metrics: dict[str, Any]) -> str:
    shown = {k: v for k, v in metrics.items() if k not in ("n", "completions") and not isinstance(v, list)}
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in list(shown.items())[:4])
