"""The task-sampling side of the env -> learner contract (OpenEnv RFC 013's ``TaskSampler``).

A learner asks a sampler which train tasks to draw next (``sample``), tells it how they went
(``update``: the graded episodes' rewards and token costs), and saves its state with each
checkpoint (``state_dict`` / ``load_state_dict``, a JSON-able dict), so a resumed run continues
the same mix. What a task's difficulty key is (a level, a subject, a family) is the env's
knowledge: ``LearnerEnv.curriculum_keys`` declares the keys of its train split and
``LearnerEnv.curriculum_key`` names one task's; a sampler never reads task fields itself.

The learner's samplers (``sequential``, ``uniform``, ``curriculum``) are in
``learner/training/task_sampler.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class TaskSampler(Protocol):
    """Which train tasks come next. ``update`` takes one entry per graded episode (a task drawn
    once and sampled G times appears G times): its id, its reward (the env's verdict, 1.0 for
    passed) and its cost in tokens."""

    def sample(self, n: int) -> list[str]: ...

    def update(self, task_ids: Sequence[str], rewards: Sequence[float],
               costs: Sequence[float]) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
