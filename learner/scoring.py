"""Grading completions through the env, concurrently (code graders wait on sandboxes)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from envs.base import TaskEnv, is_infra_error
from tasks import Task


@dataclass
class Scores:
    """Per completion: total reward, named components, whether grading itself failed."""

    rewards: list[float]
    components: list[dict[str, float]]
    passed: list[bool]
    infra_error: list[bool]  # a sandbox failure: the sample says nothing about the policy
    infos: list[dict[str, Any]] = field(repr=False, default_factory=list)


def score_all(
    env: TaskEnv, tasks: list[Task], completions: list[str], workers: int = 16
) -> Scores:
    """Grade ``completions[i]`` against ``tasks[i]`` with ``env.score`` on a thread pool."""
    if len(tasks) != len(completions):
        raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        results = list(pool.map(env.score, tasks, completions))
    infos = [info for _, info in results]
    return Scores(
        rewards=[float(r) for r, _ in results],
        components=[dict(info.get("rewards", {})) for info in infos],
        passed=[bool(info.get("passed")) for info in infos],
        infra_error=[is_infra_error(info) for info in infos],
        infos=infos,
    )
