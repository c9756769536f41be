"""Grading many (task, completion) pairs for the card: concurrently where the env can
(``grade_many``: the sandboxed envs), and never raising: a verifier that raises is a result
(``envs.grading.grade_batch``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envs.base import TaskEnv, max_reward
from envs.grading import grade_batch, grading_raised, is_infra_error
from tasks import Task


@dataclass(frozen=True)
class Graded:
    reward: float
    frac: float  # reward / the env's maximum reward
    skill: float  # the same over the env's check components only (no format shaping)
    passed: bool
    infra: bool  # the grading infrastructure failed: says nothing about the verifier's rule
    error: str | None  # the verifier raised this (a bug: bad input must get a verdict)
    seconds: float
    reason: str = ""

    @property
    def usable(self) -> bool:
        """Whether the sample says something about the reward rule."""
        return not self.infra and self.error is None


def skill_weights(env: TaskEnv) -> dict[str, float]:
    """The weights of the env's ``check_components`` (what does not depend on the answer's
    format: ``correct``, ``tests``, ``content`` and ``valid``); all weights when those are 0."""
    weights = {k: w for k, w in env.reward_weights.items()
               if k in env.check_components and w > 0}
    return weights or {k: w for k, w in env.reward_weights.items() if w > 0}


def grade(env: TaskEnv, pairs: Sequence[tuple[Task, str]]) -> list[Graded]:
    """``env.score`` of each pair, in order."""
    if not pairs:
        return []
    top = max_reward(env)
    skill = skill_weights(env)
    results = grade_batch(env, [t for t, _ in pairs], [c for _, c in pairs])
    return [_graded(r, top, skill) for r in results]


def _graded(result: Any, top: float, skill: dict[str, float]) -> Graded:
    reward, info = result
    raised = grading_raised(info)
    if raised is not None:
        return Graded(0.0, 0.0, 0.0, False, False, raised[:200], 0.0, "raised")
    rewards = info.get("rewards") or {}
    total = sum(skill.values())
    earned = sum(w * float(rewards.get(k, 0.0)) for k, w in skill.items())
    return Graded(float(reward), float(reward) / top if top > 0 else 0.0,
                  earned / total if total > 0 else 0.0,
                  bool(info.get("passed")), is_infra_error(info), None,
                  float(info.get("grading_s") or 0.0), str(info.get("reason", "")))
