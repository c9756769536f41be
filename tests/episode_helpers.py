"""A multi-turn test env the tiny random model uses for real: its tool needs no sandbox.

``grpo/MathPython-v0`` needs Docker and a model that writes Python; the tiny model writes
random tokens. Here the "shout" tool is called by any turn that reaches 12 characters: the
call is those characters and the observation is them in capitals. A shorter turn (one that
ends with EOS or at the token budget first) is the final answer, graded like ``ShortEnv``;
a tool call on the last allowed turn ends the episode as truncated, graded on what was given.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, ClassVar

from envs.verify.verdict import Verdict
from tasks import Task
from tests.learner_helpers import ShortEnv

CALL_CHARS = 12


class ShoutEpisode:
    def __init__(self, env: ShoutEnv, task: Task):
        self.env, self.task = env, task
        self.turns = self.calls = self.errors = 0
        self.texts: list[str] = []
        self.tool_s = 0.0
        self.over = False

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.over:
            raise RuntimeError("step() after the episode ended")
        self.turns += 1
        self.texts.append(action)
        end = self.env.tool_call_end(action)
        stats = lambda: {"turns": self.turns, "tool_calls": self.calls,  # noqa: E731
                         "tool_errors": self.errors, "tool_s": self.tool_s,
                         "truncated_turns": int(end is not None)}
        if end is not None and self.turns < self.env.max_turns:
            self.calls += 1
            start = time.perf_counter()
            if self.env.fails_now():
                self.over = True
                info = {**self.env.task_info(self.task), "rewards": {}, "passed": False,
                        "reason": "sandbox_error",
                        "verdict": Verdict.fail("sandbox_error", sandbox_error=True), **stats()}
                return "", 0.0, True, False, info
            if "!" in action[:end]:
                self.errors += 1
                obs = "error: the tool takes no '!'"
            else:
                obs = action[:end].upper()
            self.tool_s += time.perf_counter() - start
            return obs, 0.0, False, False, {}
        self.over = True
        reward, info = self.env.score(self.task, "\n".join(self.texts))
        info.update(stats())
        return "", reward, end is None, end is not None, info


class ShoutEnv(ShortEnv):
    """``fail_every``: every n-th tool call (over all episodes) is an infrastructure failure."""

    default_weights: ClassVar[dict[str, float]] = {"short": 1.0, "digit": 0.5}

    def __init__(self, *args: Any, max_turns: int = 3, fail_every: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.max_turns = max_turns
        self.fail_every = fail_every
        self._calls = itertools.count(1)
        self._lock = threading.Lock()

    def tool_call_end(self, text: str) -> int | None:
        return CALL_CHARS if len(text) >= CALL_CHARS else None

    def episode(self, task: Task | str) -> ShoutEpisode:
        return ShoutEpisode(self, self.pack.get(task) if isinstance(task, str) else task)

    def fails_now(self) -> bool:
        with self._lock:
            n = next(self._calls)
        return bool(self.fail_every) and n % self.fail_every == 0


SHOUT_ENV_ID = "test/Shout-v0"


def register() -> None:
    import gymnasium as gym

    if SHOUT_ENV_ID not in gym.registry:
        gym.register(SHOUT_ENV_ID, entry_point=ShoutEnv)
