"""Every reasoning-gym task's report-card verdict, as committed in ``cards.json``.

``benchmarks/reasoning_gym_cards.py`` runs each task's card (``envs.tools.card.reasoning_gym``)
and writes the file; ``python -m envs list`` reads it, so its default view (the tasks whose card passes) needs
no card run and no reasoning-gym. A task fails its card when a check fails, when it has no gold
answer to check the oracle with, or when a gold padded with other candidates is paid.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CARDS = Path(__file__).resolve().parent / "cards.json"
#: Tasks not offered at all, and why: generating them has effects outside the process.
NOT_OFFERED = {
    "codeio": "not offered: its generator executes the dataset's programs in this process, "
              "and they write files into the working directory",
}


@dataclass(frozen=True)
class Verdict:
    task: str
    ok: bool
    kind: str
    reason: str  # why it fails ("" when it passes)
    summary: str


def verdicts(path: Path = CARDS) -> dict[str, Verdict]:
    """Task name -> its committed verdict (empty when no file was written)."""
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: Verdict(name, bool(v["ok"]), v.get("kind", "?"), v.get("reason", ""),
                          v.get("summary", ""))
            for name, v in raw.get("tasks", {}).items()}


def rg_version_carded(path: Path = CARDS) -> str | None:
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("reasoning_gym")


def padded(env: Any, gold: str, others: Sequence[str]) -> dict[str, str]:
    """Name -> the gold hedged among other candidates (``others``: other tasks' golds), each in
    the env's answer format: the answers a candidate-listing policy writes."""
    a, b = (list(others) + ["12", "13"])[:2]
    fmt = env.answer_in_format
    return {
        "padded_after": fmt(f"{gold} {a} {b}"),
        "padded_before": fmt(f"{a} {b} {gold}"),
        "padded_list": fmt(f"{a}, {gold}, {b}"),
        "two_answers": fmt(gold) + " or " + fmt(a),
    }


def list_rows(show_all: bool = False, path: Path = CARDS) -> tuple[list[list[str]], int]:
    """``python -m envs list``'s rows (task, kind, verdict) and how many it hides: by default
    the tasks whose card passes; ``show_all`` adds the rest with the reason. Reads only
    ``cards.json``: no card run, and no reasoning-gym needed."""
    rows, hidden = [], 0
    for name, v in sorted(verdicts(path).items()):
        if v.ok or show_all:
            rows.append([name, v.kind, "pass" if v.ok else f"fail: {v.reason}"])
        else:
            hidden += 1
    return rows, hidden
