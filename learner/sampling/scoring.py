"""Grading completions through the env, by ``envs.grading.grade_batch``: concurrently on this
machine (code graders wait on sandboxes), or on a Ray cluster through a ``RemoteScorer``
(``envs.ray_scoring.RayScorer``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.contract import LearnerEnv
from envs.grading import Backend, Threads, grade_batch, is_infra_error
from tasks import Task

#: Grades elsewhere with the same results as ``env.score`` (``envs.ray_scoring.RayScorer``): a
#: backend of the grading door.
RemoteScorer = Backend


@dataclass
class Scores:
    """Per completion: total reward, named components, whether grading itself failed."""

    rewards: list[float]
    components: list[dict[str, float]]
    passed: list[bool]
    infra_error: list[bool]  # a sandbox failure: the sample says nothing about the policy
    infos: list[dict[str, Any]] = field(repr=False, default_factory=list)

    @classmethod
    def from_results(cls, rewards: Sequence[float], infos: Sequence[dict[str, Any]]) -> Scores:
        """Scores from each completion's reward and the env's info dict (``env.score``'s, or
        an episode's last step's)."""
        return cls(
            rewards=[float(r) for r in rewards],
            components=[dict(info.get("rewards", {})) for info in infos],
            passed=[bool(info.get("passed")) for info in infos],
            infra_error=[is_infra_error(info) for info in infos],
            infos=list(infos),
        )

    @classmethod
    def concat(cls, parts: Sequence[Scores]) -> Scores:
        return cls.from_results([r for s in parts for r in s.rewards],
                                [i for s in parts for i in s.infos])


def score_all(
    env: LearnerEnv, tasks: list[Task], completions: list[str], workers: int = 16,
    scorer: RemoteScorer | None = None,
) -> Scores:
    """Grade ``completions[i]`` against ``tasks[i]`` through ``envs.grading.grade_batch``: on
    ``workers`` threads (more than a code env's warm pool: a program that hangs holds its
    thread for the time limit), or with ``scorer`` (e.g. over a Ray cluster) when one is
    given. Never raises past its arguments: a pair whose grading failed is an infrastructure
    error (``Scores.infra_error``), which training drops."""
    backend = scorer if scorer is not None else Threads(env, workers)
    results = grade_batch(env, tasks, completions, backend=backend)
    return Scores.from_results([r for r, _ in results], [dict(info) for _, info in results])


def infra_reason(scores: Scores) -> str | None:
    """What the sandbox said about the first sample it failed to grade (None if none failed)."""
    for failed, info in zip(scores.infra_error, scores.infos, strict=False):
        if failed:
            return failure_reason(info)
    return None


def failure_reason(info: dict[str, Any]) -> str:
    """What the sandbox said about one sample it failed to grade, in one line."""
    verdict = info.get("verdict")
    details = getattr(verdict, "details", None) or {}
    text = str(details.get("error") or info.get("reason") or "the sandbox failed")
    return " ".join(text.split())  # one line, whatever the engine's message held
