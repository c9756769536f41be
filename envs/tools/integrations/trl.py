"""A grpo/* env as a reward function for TRL's ``GRPOTrainer``.

    from envs.tools.integrations import trl as grpo_trl  # before trl: silences its vLLM-version warnings
    from trl import GRPOConfig, GRPOTrainer

    train = grpo_trl.dataset("grpo/MathExact-v0", pack="arith", level=1, size=256)
    reward = grpo_trl.reward_func("grpo/MathExact-v0", pack="arith", level=1)
    GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=train, args=GRPOConfig(...))

The dataset has a ``prompt`` column (chat messages: the env's prompt as one user turn) and a
``task_id`` column, which TRL passes to the reward function for every completion. A group is
graded concurrently through ``envs.grading.grade_batch`` (code through the sandbox pool); a
completion whose grading hit an infrastructure failure (or raised) gets ``None`` (TRL leaves it out) instead of 0; the mean
of each reward component is reported to TRL's logs as ``<env name>/<component>``.

Importing this module silences the two start-up messages TRL's import prints on our pinned
versions and a user cannot act on (``envs.startup_noise``); docs/integrations.md
has a snippet that trains two steps on CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from envs.base import TaskEnv
from envs.extras import require
from envs.grading import Threads, grade_batch, is_infra_error
from envs.startup_noise import silence_trl_import_noise
from tasks import Task

silence_trl_import_noise()  # before the caller imports trl's trainers

__all__ = ["dataset", "reward_func"]


def _env(env_id: str, **env_kwargs: Any) -> TaskEnv:
    import envs  # noqa: F401  (registers the grpo/* envs)

    env = gym.make(env_id, **env_kwargs).unwrapped
    if not isinstance(env, TaskEnv):
        raise TypeError(f"{env_id} is not a grpo-gym TaskEnv")
    return env


def dataset(env_id: str, split: str = "train", size: int | None = None, **env_kwargs: Any):
    """A ``datasets.Dataset`` of the env's tasks: ``prompt`` (chat messages) and ``task_id``.

    ``size`` takes the first N tasks of the split (required for an unbounded procedural split).
    """
    Dataset = require("datasets", "trl", "grpo_trl.dataset").Dataset

    env = _env(env_id, split=split, **env_kwargs)
    return Dataset.from_list([{"prompt": [{"role": "user", "content": env.prompt(t)}],
                               "task_id": t.id} for t in _first_tasks(env, split, size)])


def _first_tasks(env: TaskEnv, split: str, size: int | None) -> list[Task]:
    """The first ``size`` tasks of ``split`` (all of it when None; an unbounded split needs N)."""
    total = env.pack.size(split)
    if size is None:
        if total is None:
            raise ValueError(f"split '{split}' of pack '{env.pack.name}' is unbounded: "
                             "give size=N")
        n = total
    else:
        n = size if total is None else min(size, total)
    return [env.pack.task_at(split, i) for i in range(n)]


def _text(completion: Any) -> str:
    """TRL passes plain strings, or chat messages (the last one is the model's)."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"]) if completion else ""


def reward_func(env_id: str, *, workers: int = 16,
                **env_kwargs: Any) -> Callable[..., list[float | None]]:
    """A reward function ``GRPOTrainer(reward_funcs=[...])`` accepts, grading through the env."""
    env = _env(env_id, **env_kwargs)
    name = env_id.split("/")[-1]

    def reward(prompts: list[Any] | None = None, completions: list[Any] | None = None,
               task_id: list[str] | None = None, log_metric: Callable | None = None,
               **_: Any) -> list[float | None]:
        if task_id is None:
            raise ValueError("the dataset needs a 'task_id' column (see envs.tools.integrations.trl."
                             "dataset)")
        texts = [_text(c) for c in completions or []]
        results = grade_batch(env, task_id, texts, backend=Threads(env, workers))
        valid = [info for _, info in results if not is_infra_error(info)]
        if log_metric is not None and valid:
            for component in env.default_weights:
                values = [info["rewards"].get(component, 0.0) for info in valid]
                log_metric(f"{name}/{component}", sum(values) / len(values))
        return [None if is_infra_error(info) else float(r) for r, info in results]

    reward.__name__ = name  # TRL names the reward's log columns after it
    return reward
