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
