"""An OpenEnv ``Environment`` over a grpo-gym env: one per session, all sharing one served env.

``ServedEnv`` holds the env built once with ``gym.make`` (its packs, checker and sandbox pool
are shared: ``TaskEnv.episode`` and ``score`` are thread-safe). ``EpisodeEnvironment`` is what
OpenEnv makes per WebSocket session (and per stateless HTTP call): a random stream for picking
tasks, the current ``envs.episode.Episode`` and the state. Grading happens here, on the server;
the observations carry the grading's outcome only.

Errors: what the client asked wrongly (a step with no episode, an unknown task, a bad argument)
says so; anything else is an internal error, whose detail goes to the server's log and whose
message to the client is generic, with a reference to find it in the log.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from envs.base import TaskEnv, is_infra_error
from envs.contract import LearnerEpisode, ScoreInfo
from envs.episode import Episode, EpisodeError
from envs.grading import grade_batch
from envs.tools.serve.types import CompletionAction, CompletionObservation, EpisodeState
from tasks import PackError, Task

RESET_KEYWORDS = ("seed", "episode_id", "task_id", "options")
LOG = logging.getLogger("envs.tools.serve")
T = TypeVar("T")


class RequestError(ValueError):
    """A request the served env refuses; its message is for the client."""


class InternalError(RuntimeError):
    """Something failed on the server: the client gets a generic message, the log the detail."""


#: The errors whose messages are for the client; any other is an ``InternalError``.
PUBLIC_ERRORS = (EpisodeError, PackError, RequestError)


def public_errors(what: str, call: Callable[[], T]) -> T:
    """``call()``; an exception that is not one of ``PUBLIC_ERRORS`` is logged with its
    traceback and raised as an ``InternalError`` that gives nothing of it away."""
    try:
        return call()
    except PUBLIC_ERRORS:
        raise
    except Exception:
        ref = uuid.uuid4().hex[:12]
        LOG.exception("internal error %s on %s", ref, what)
        raise InternalError(f"internal error on the server during {what} (logged as {ref})"
                            ) from None


class ServedEnv:
    """The env a server serves, built once, and where its grading runs (locally, or on a Ray
    cluster with ``ray_address``)."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None,
                 ray_address: str | None = None):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        made = gym.make(env_id, **self.env_kwargs)
        env = made.unwrapped
        if not isinstance(env, TaskEnv):
            made.close()
            raise TypeError(f"{env_id} is not a grpo-gym env (envs.base.TaskEnv): "
                            f"it is a {type(env).__name__}")
        self.env: TaskEnv = env
        self.remote: RemoteGrading | None = None
        if ray_address is not None:
            self.remote = RemoteGrading(env, ray_address)

    def episode(self, task: Task) -> LearnerEpisode:
        if self.remote is None:
            return self.env.episode(task)
        return Episode(_GradedRemotely(self.env, self.remote), task)

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()
        self.env.close()


class RemoteGrading:
    """Grading on the Ray backend (``envs.ray_scoring.RayScorer``), for steps that arrive from
    many sessions at once: one thread gathers whatever is waiting into one ``grade_batch`` call,
    so the cluster grades a batch while the sessions wait on their own futures."""

    def __init__(self, env: TaskEnv, address: str):
        from envs.ray_scoring import RayScorer  # Ray is imported only when asked for

        self.env = env
        self.scorer = RayScorer(env, address)
        self._queue: queue.Queue[tuple[Task, str, Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="grpo-ray-grading", daemon=True)
        self._thread.start()

    def score(self, task: Task, completion: str) -> tuple[float, ScoreInfo]:
        if not isinstance(completion, str):  # as env.score
            raise TypeError(f"a completion must be a str, got {type(completion).__name__}")
        done: Future = Future()
        self._queue.put((task, completion, done))
        return done.result()

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            batch = [first]
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            try:
                results = grade_batch(self.env, [t for t, _, _ in batch],
                                      [c for _, c, _ in batch], backend=self.scorer)
            except Exception as exc:  # noqa: BLE001 - bad arguments: handed to each session
                for _, _, done in batch:
                    done.set_exception(exc)
                continue
            for (_, _, done), result in zip(batch, results, strict=True):
                done.set_result(result)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
        self.scorer.close()


class _GradedRemotely:
    """The env as an episode sees it (``envs.episode.EpisodeEnv``), with ``score`` on Ray."""

    def __init__(self, env: TaskEnv, remote: RemoteGrading):
        self._env = env
        self.score = remote.score
        self.tool = env.tool
        self.max_turns = env.max_turns
        self.reward_weights = env.reward_weights
        self.tool_call_end = env.tool_call_end
        self.task_info = env.task_info


class EpisodeEnvironment(Environment[CompletionAction, CompletionObservation, EpisodeState]):
    """One session's episodes of the served env. ``reset(seed=, task_id=)`` picks the task as
    ``gym.make(...).reset(seed=, options={"task_id": ...})`` does (the same seed, the same
    task); ``step`` plays one turn; a step with no running episode is an ``EpisodeError``."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # sessions share only the thread-safe served env

    def __init__(self, served: ServedEnv):
        super().__init__()
        self.served = served
        self._rng: np.random.Generator | None = None
        self._episode: LearnerEpisode | None = None
        self._state = EpisodeState()

    # No **kwargs: OpenEnv passes a reset only the arguments its signature names (its own
    # session_id would otherwise collide with the server's internal call, a TypeError).
    def reset(self, seed: int | None = None, episode_id: str | None = None,
              task_id: str | None = None, options: Mapping[str, Any] | None = None
              ) -> CompletionObservation:
        return public_errors("reset", lambda: self._reset(seed, episode_id, task_id, options))

    def _reset(self, seed: Any, episode_id: Any, task_id: Any, options: Any
               ) -> CompletionObservation:
        if options is not None and not isinstance(options, Mapping):
            raise RequestError("reset's options must be a mapping, e.g. {\"task_id\": ...}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or seed < 0):
            raise RequestError(f"reset's seed must be a non-negative integer, got {seed!r:.40}")
        if task_id is None and options:
            task_id = options.get("task_id")
        env = self.served.env
        if seed is not None:
            self._rng, _ = seeding.np_random(seed)
        elif self._rng is None:
            self._rng, _ = seeding.np_random()
        # As TaskEnv.reset: a task id outside the served split is refused (split="all" serves
        # any), so a train server never hands out a test task.
        if task_id is not None:
            task = env.task_in_split(str(task_id))
        else:
            task = env.task_at_random(self._rng)
        self._episode = self.served.episode(task)
        self._state = EpisodeState(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                                   task_id=task.id)
        info = env.task_info(task)
        return CompletionObservation(prompt=env.prompt(task), task_id=task.id,
                                     pack_version=info.get("pack_version"))

    def step(self, action: CompletionAction, timeout_s: float | None = None
             ) -> CompletionObservation:  # no **kwargs either: as reset
        return public_errors("step", lambda: self._step(action))

    def _step(self, action: CompletionAction) -> CompletionObservation:
        if self._episode is None:
            raise EpisodeError("step without a running episode: reset first (an episode ends "
                               "when its answer is graded)")
        text, reward, terminated, truncated, info = self._episode.step(action.completion)
        self._state.step_count += 1
        done = terminated or truncated
        if not done:  # a tool turn: its output is the next user turn
            return CompletionObservation(
                prompt=text, reward=float(reward), done=False, task_id=info.get("task_id"),
                pack_version=info.get("pack_version"), tool_output=text,
                tool_status=info.get("tool_status"))
        self._episode = None
        return CompletionObservation(
            prompt="", reward=float(reward), done=True, task_id=info.get("task_id"),
            pack_version=info.get("pack_version"), reason=info.get("reason"),
            passed=info.get("passed"), rewards={k: float(v) for k, v in
                                                (info.get("rewards") or {}).items()},
            grading_s=_seconds(info.get("grading_s")), infra_error=is_infra_error(info))

    @property
    def state(self) -> EpisodeState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        env = self.served.env
        module = sys.modules.get(type(env).__module__)
        doc = ((module.__doc__ if module else None) or type(env).__doc__ or "").strip()
        summary = doc.split("\n\n")[0].replace("\n", " ") if doc else "a grpo-gym environment"
        return EnvironmentMetadata(
            name=self.served.env_id,
            description=f"grpo-gym {self.served.env_id} over pack '{env.pack.name}': {summary}",
            version=str(env.pack.pack_version),
            author="grpo-gym",
        )

    def close(self) -> None:
        # The served env outlives every session (the server closes it at shutdown).
        self._episode = None


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)

