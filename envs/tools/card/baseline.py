"""The CI baseline: each built-in card's check statuses and compared metrics (latency left out),
committed as ``envs/tools/card/baseline.json``. ``tests/test_verifier_cards.py`` fails when a fast
card is worse than it; ``python -m envs card --all --fast --update-baseline`` rewrites it and
the README's table after a deliberate change."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.tools.card.card import Card
from envs.tools.card.checks import BY_ID, regressions

BASELINE = Path(__file__).resolve().parent / "baseline.json"


def entry(card: Card) -> dict[str, Any]:
    """What the baseline keeps of ``card``: per check its status and the metrics it compares."""
    checks = {}
    for r in card.results:
        if not r.check.better:  # latency: a measurement of the machine, not of the rule
            continue
        metrics = {k: r.metrics[k] for k in ("n", *r.check.better) if k in r.metrics}
        checks[r.check.id] = {"status": r.status, "metrics": _rounded(metrics)}
    return {"tasks": card.n_tasks, "seed": card.seed, "fast": card.fast, "checks": checks}


def _rounded(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}


def write(cards: Sequence[Card], path: Path = BASELINE) -> None:
    data = {card.key: entry(card) for card in cards}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read(path: Path = BASELINE) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def compare(cards: Sequence[Card], baseline: dict[str, Any]) -> list[str]:
    """Every regression of ``cards`` against ``baseline``, each naming its card and check;
    a card the baseline lacks is one too (a new pack needs its baseline written)."""
    found = []
    for card in cards:
        before = baseline.get(card.key)
        if before is None:
            found.append(f"{card.key}: not in the baseline")
            continue
        now = entry(card)
        for check_id, old in before["checks"].items():
            if check_id not in now["checks"]:
                found.append(f"{card.key}: {check_id} no longer reported")
                continue
            new = now["checks"][check_id]
            found += [f"{card.key}: {r}" for r in regressions(BY_ID[check_id], new, old)]
    return found
