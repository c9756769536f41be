"""Scorers that misbehave, for the reasoning-gym scorer worker's tests (run in the worker)."""

from __future__ import annotations

import time
from typing import Any


def hang(answer: str, entry: dict[str, Any]) -> float:
    time.sleep(3600)
    return 1.0


def crash(answer: str, entry: dict[str, Any]) -> float:
    raise RuntimeError("upstream scorer bug")


def not_a_score(answer: str, entry: dict[str, Any]) -> Any:
    return float("nan")


def pays_anything(answer: str, entry: dict[str, Any]) -> float:
    return 1.0


def evals(answer: str, entry: dict[str, Any]) -> float:
    """A scorer with a hole, as several of reasoning-gym's have: it runs the answer."""
    return float(eval(answer) or 0.0)  # noqa: S307 - the point of the test


def pid(answer: str, entry: dict[str, Any]) -> float:
    """The scoring process's id, as a score below 1 (pids stay below 2**22)."""
    import os

    return os.getpid() / 2**23
