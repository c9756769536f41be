"""A served grpo-gym env (``python -m envs serve``) in TRL's ``GRPOTrainer`` through TRL's
OpenEnv path, ``environment_factory``: the trainer makes one ``ServedEpisode`` per rollout,
``reset`` fetches the task's prompt from the server and ``served_reward`` sends the completion
back; grading happens on the server, the trainer holds no verifier, gold or sandbox.

    from functools import partial
    from trl import GRPOConfig, GRPOTrainer
    from envs.tools.integrations.trl_openenv import ServedEpisode, served_reward, task_dataset

    url = "http://127.0.0.1:8000"
    GRPOTrainer(model=..., processing_class=tokenizer, reward_funcs=[served_reward],
                environment_factory=partial(ServedEpisode, url),
                train_dataset=task_dataset(url, 64), args=GRPOConfig(...))

TRL asks for a chat template that can render tool calls when an ``environment_factory`` is
given (even one whose env exposes no tools, as here); docs/openenv.md shows one for a model
whose template cannot. ``task_dataset`` pins the tasks (a ``task_id`` column, empty prompts the
served prompt fills), so the ``num_generations`` rollouts of a group play the same task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envs.extras import require

__all__ = ["ServedEpisode", "served_reward", "task_dataset"]


class ServedEpisode:
    """One rollout's episode on a served env, over its own WebSocket session. TRL exposes
    public methods as tools: this class has none (a single-turn task has no tool to call)."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None):
        GenericEnvClient = require("openenv.core.generic_client", "openenv",
                                   "ServedEpisode").GenericEnvClient

        self._client = GenericEnvClient(base_url=base_url, headers=dict(headers or {})).sync()
        self._last: dict[str, Any] = {}

    def reset(self, task_id: str | None = None, seed: int | None = None, **_: Any) -> str:
        """Start the episode (TRL passes the dataset row's columns); returns the task's prompt,
        which TRL appends to the row's (empty) user message."""
        asked = {k: v for k, v in (("task_id", task_id), ("seed", seed)) if v is not None}
        result = self._client.reset(**asked)
        self._last = dict(result.observation)
        return self._last["prompt"]

    def _grade(self, completion: str) -> float | None:
        result = self._client.step({"completion": completion})
        self._last = dict(result.observation)
        if self._last.get("infra_error") or not result.done:
            return None  # TRL leaves None out instead of scoring the infrastructure
        return float(result.reward)


def served_reward(completions: Sequence[Any], environments: Sequence[ServedEpisode],
                  **_: Any) -> list[float | None]:
    """TRL reward function: each completion graded by its rollout's served episode."""
    return [env._grade(_text(c)) for c, env in zip(completions, environments, strict=True)]


def task_dataset(base_url: str, size: int, seed: int = 0,
                 headers: Mapping[str, str] | None = None) -> Any:
    """``size`` tasks the server draws for seeds ``seed, seed+1, ...``: a ``datasets.Dataset``
    with an empty user prompt (the served prompt fills it) and the ``task_id``."""
    Dataset = require("datasets", "trl", "task_dataset").Dataset
    GenericEnvClient = require("openenv.core.generic_client", "openenv",
                               "task_dataset").GenericEnvClient

    with GenericEnvClient(base_url=base_url, headers=dict(headers or {})) as client:
        ids = [client.reset(seed=seed + i).observation["task_id"] for i in range(size)]
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * size,
                              "task_id": ids})


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    # Conversational: the messages the model wrote; the last one is its answer.
    return str(completion[-1].get("content") or "") if completion else ""
