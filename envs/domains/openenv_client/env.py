"""grpo/OpenEnv-v0: any OpenEnv server as a grpo-gym env.

``gym.make("grpo/OpenEnv-v0", base_url="http://127.0.0.1:8000")`` reads the server's
``/schema`` and ``/metadata``; the completion fills the action's single required string field
(or ``action_field``), and the text of each observation (``observation_field``, else the
``prompt`` a grpo-gym server sends, else the observation as JSON) is the next user turn. Tasks
are the server's reset seeds (``envs.domains.openenv_client.seeds``). ``launch_command`` starts the
server as a child process and stops it with the env (``envs.domains.openenv_client.server``).

An episode plays turns over one WebSocket session until the server says ``done``, or
``max_turns`` turns (then it is truncated), as ``envs.episode.Episode`` does for tool turns, so
the learner's multi-turn path runs it unchanged. The episode's reward is the sum of the step
rewards (what the learner adds up). ``passed`` (the learner's accuracy) is, in this order: the
episode's return >= ``reward_max`` when it is given; the observation's own boolean ``passed``
(a grpo-gym server sends it); else a return above 0 (a foreign server that declares no maximum
pays only for something). A server that cannot be reached, dies, times out, sends a reward
that is not a finite number within ``reward_range``, or a message over
``max_observation_bytes`` (refused unread) ends the episode as an infrastructure error naming
the URL (``envs.base.is_infra_error``): dropped by the learner, never scored 0.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

from envs.base import INFRA_ERROR_KEY, TaskEnv
from envs.contract import ScoreInfo
from envs.domains.openenv_client.schema import (
    SchemaError,
    action_field,
    check_observation_field,
    observation_text,
)
from envs.domains.openenv_client.seeds import UNAVAILABLE, seed_pack
from envs.domains.openenv_client.server import ServerProcess
from envs.domains.openenv_client.session import (
    RemoteError,
    Session,
    Turn,
    get_json,
    one_line,
    reward_problem,
)
from envs.episode import Elapsed, EpisodeError, StepResult
from envs.keywords import (
    FINITE_NUMBER,
    POSITIVE_SECONDS,
    Accepts,
    KeywordError,
    check_keywords,
    integer_at_least,
    keyword_names,
    mapping_of,
    optional,
)
from envs.python_tool import PythonTool
from envs.spaces import text_problem
from envs.verify.verdict import Verdict
from tasks import Pack, Task

#: Turns per episode unless ``max_turns`` says otherwise (a server that ends at once ends).
DEFAULT_TURNS = 4
#: The one reward component: the server's reward, summed over the episode.
REWARD = "reward"
#: A step reward outside this range is refused unless ``reward_range`` declares another: wide
#: enough for any scale a task uses, far inside what group normalisation survives (1e308
#: squared is inf).
DEFAULT_REWARD_RANGE = (-1e6, 1e6)
#: Bytes of one server message (an observation; ``/schema`` and ``/metadata`` too) unless
#: ``max_observation_bytes`` says otherwise: a prompt is text for a model, never megabytes.
DEFAULT_OBSERVATION_BYTES = 1 << 20
#: Characters of a server's ``reason`` kept in an error line or an info.
REASON_CHARS = 300
_URL = Accepts("an http(s) URL such as 'http://127.0.0.1:8000'",
               lambda v: v is None or (isinstance(v, str) and v.startswith(("http://", "https://"))
                                       and len(v) > len("https://")))
_NAME = Accepts("a field name (a string) or None", lambda v: v is None or isinstance(v, str))
_COMMAND = Accepts("a shell command line or a list of arguments",
                   lambda v: v is None or (isinstance(v, str) and v.strip() != "") or (
                       isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                       and all(isinstance(a, str) for a in v)))
_PACK = Accepts("a pack name or a loaded Pack", lambda v: v is None or isinstance(v, str | Pack))
_TOOL = Accepts("True, False or a PythonTool", lambda v: isinstance(v, bool | PythonTool))
_SPLIT = Accepts("a split name such as 'train' or 'test'", lambda v: isinstance(v, str))
_WEIGHTS = optional(mapping_of("component names", FINITE_NUMBER))
_MAX = Accepts("a finite number or None", lambda v: v is None or (
    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)))


def _is_range(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in value) and value[0] < value[1])


_RANGE = Accepts("a pair [low, high] of finite numbers with low < high", _is_range)


def _missing_extra() -> str | None:
    try:
        import openenv.core.generic_client  # noqa: F401
    except ImportError as exc:
        return (f"grpo/OpenEnv-v0 needs the openenv extra (pip install -e \".[openenv]\"): "
                f"{one_line(exc)}")
    return None


class OpenEnvEnv(TaskEnv):
    """Keyword arguments: ``base_url`` (the server; with ``launch_command``, where it will
    answer), ``action_field``, ``observation_field``, ``launch_command`` (a shell line or an
    argument list), ``launch_timeout`` (seconds for ``/health`` to answer), ``timeout``
    (seconds per message), ``max_turns``, ``heldout_size`` (held-out seeds) and
    ``reward_max`` (the reward that counts as passed), ``reward_range`` (the step rewards the
    server may send: any other is an infrastructure error) and ``max_observation_bytes`` (the
    largest server message taken); ``split`` and ``reward_weights`` as in every env. ``pack``
    and ``python_tool`` belong to the server here and are refused."""

    env_id: ClassVar[str] = "grpo/OpenEnv-v0"
    default_weights: ClassVar[dict[str, float]] = {REWARD: 1.0}

    def __init__(self, base_url: str | None = None, action_field: str | None = None,
                 observation_field: str | None = None,
                 launch_command: str | Sequence[str] | None = None,
                 launch_timeout: float = 60.0, timeout: float = 60.0,
                 max_turns: int | None = None, heldout_size: int = 64,
                 reward_max: float | None = None,
                 reward_range: Sequence[float] = DEFAULT_REWARD_RANGE,
                 max_observation_bytes: int = DEFAULT_OBSERVATION_BYTES, **kwargs: Any):
        check_keywords(
            self.env_id, base_url=(base_url, _URL), action_field=(action_field, _NAME),
            observation_field=(observation_field, _NAME),
            launch_command=(launch_command, _COMMAND),
            launch_timeout=(launch_timeout, POSITIVE_SECONDS),
            timeout=(timeout, POSITIVE_SECONDS),
            max_turns=(max_turns, optional(integer_at_least(1))),
            heldout_size=(heldout_size, integer_at_least(1)), reward_max=(reward_max, _MAX),
            reward_range=(reward_range, _RANGE),
            max_observation_bytes=(max_observation_bytes, integer_at_least(1024)))
        unknown = sorted(set(kwargs) - {"split", "reward_weights", "pack", "python_tool"})
        if unknown:
            names = keyword_names(type(self), TaskEnv)
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise KeywordError(f"{self.env_id} has no keyword {', '.join(map(repr, unknown))}"
                               f"{hint}; it takes {', '.join(names)}")
        # TaskEnv's words for these two, so a bad value reads as in every env.
        check_keywords(self.env_id, pack=(kwargs.get("pack"), _PACK),
                       python_tool=(kwargs.get("python_tool", False), _TOOL),
                       split=(kwargs.get("split", "train"), _SPLIT),
                       reward_weights=(kwargs.get("reward_weights"), _WEIGHTS))
        for name in ("pack", "python_tool"):
            if kwargs.pop(name, None) not in (None, False):
                raise KeywordError(f"{self.env_id}: {name} belongs to the server here (its "
                                   "tasks are its reset seeds, its tools its own); drop it")
        if base_url is None:
            raise KeywordError(f"{self.env_id}: base_url takes the server's URL, such as "
                               "'http://127.0.0.1:8000' (with launch_command: where it will "
                               "answer), got None")
        if (problem := _missing_extra()) is not None:
            raise ImportError(problem)
        self.url = base_url.rstrip("/")
        self.timeout_s = float(timeout)
        self.reward_max = None if reward_max is None else float(reward_max)
        self.reward_range = (float(reward_range[0]), float(reward_range[1]))
        self.max_observation_bytes = int(max_observation_bytes)
        self.observation_field = observation_field
        self.server: ServerProcess | None = None
        self._sessions: set[Session] = set()
        if launch_command is not None:
            self.server = ServerProcess(launch_command, self.url, float(launch_timeout))
        try:
            schema = get_json(self.url, "/schema", self.max_observation_bytes)
            metadata = get_json(self.url, "/metadata", self.max_observation_bytes)
            if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
                raise SchemaError(f"{self.url}/schema has no action schema")
            self.action_field = action_field_of(schema, action_field, self.url)
            check_observation_field(schema.get("observation") or {}, observation_field,
                                    self.url)
            pack = seed_pack(self.url, metadata if isinstance(metadata, dict) else {},
                             schema, self._first_prompt, heldout_size)
            super().__init__(pack=pack, **kwargs)
        except RemoteError as exc:  # nothing to play on: the env cannot be made
            self._stop_server()
            raise ConnectionError(f"{self.env_id}: {exc}") from None
        except SchemaError as exc:
            self._stop_server()
            raise SchemaError(f"{self.env_id}: {exc}") from None
        except BaseException:
            self._stop_server()
            raise
        self.max_turns = DEFAULT_TURNS if max_turns is None else max_turns

    # -- tasks --------------------------------------------------------------------------------
    def _first_prompt(self, seed: int) -> str:
        session = self._open()
        try:
            return observation_text(session.reset(seed=seed).observation, self.observation_field)
        finally:
            self._close(session)

    def _open(self) -> Session:
        session = Session(self.url, self.timeout_s, max_bytes=self.max_observation_bytes,
                          reward_range=self.reward_range)
        self._sessions.add(session)
        return session

    def _close(self, session: Session) -> None:
        session.close()
        self._sessions.discard(session)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        if isinstance(self._episode, RemoteEpisode):  # a new one frees the old one's session
            self._episode.close()
            self._episode = None
        prompt, info = super().reset(seed=seed, options=options)
        assert isinstance(self._episode, RemoteEpisode)  # reset made it through self.episode
        if UNAVAILABLE in self._episode.task.fields:  # no prompt to show: say why, at once
            raise ConnectionError(f"{self.env_id}: {self._episode.task[UNAVAILABLE]}")
        return prompt, info

    def episode(self, task: Task | str) -> RemoteEpisode:
        return RemoteEpisode(self, self.pack.get(task) if isinstance(task, str) else task)

    def score(self, task: Task | str, completion: str) -> tuple[float, ScoreInfo]:
        """One turn of a fresh episode of ``task``: its reward, and an info saying whether the
        server ended the episode (``truncated_turns`` when it wanted more turns)."""
        if not isinstance(completion, str):
            raise TypeError(f"a completion must be a str, got {type(completion).__name__}")
        episode = self.episode(task)
        try:
            _, reward, _, _, info = episode.step(completion, last=True)
        finally:
            episode.close()
        return reward, cast(ScoreInfo, info)  # last=True: the step was graded

    # -- the infrastructure -------------------------------------------------------------------
    def infra_outage(self) -> str | None:
        """Why the server does not answer now (one line naming the URL), or None."""
        if self.server is not None and (gone := self.server.exited()) is not None:
            return gone
        try:
            get_json(self.url, "/health", self.max_observation_bytes)
        except RemoteError as exc:
            return f"{exc}: start the server, or give launch_command"
        return None

    def no_signal_hint(self) -> str:
        return "a server whose tasks are within the model's reach, or a bigger model"

    def _stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()

    def close(self) -> None:
        episode = getattr(self, "_episode", None)
        if isinstance(episode, RemoteEpisode):
            episode.close()
        for session in list(self._sessions):
            self._close(session)
        self._stop_server()
        super().close()

    def task_info(self, task: Task) -> dict[str, Any]:
        return {**super().task_info(task), "seed": task["seed"], "server": self.url}


def action_field_of(schema: Mapping[str, Any], wanted: str | None, url: str) -> str:
    return action_field(schema["action"], wanted, url)


class RemoteEpisode:
    """One task's turns on the server: gymnasium's step semantics, one session throughout.
    ``step(..., last=True)`` ends the episode after that turn whatever the server says."""

    def __init__(self, env: OpenEnvEnv, task: Task):
        self.env, self.task = env, task
        self.turns = 0
        self.total = 0.0
        self.done = False
        self.session: Session | None = None
        self.grading_s = 0.0

    def step(self, action: str, *, last: bool = False) -> StepResult:
        if self.done:
            raise EpisodeError("this episode is over: call reset() (or env.episode(task)) "
                               "to start another")
        if not isinstance(action, str):
            raise TypeError(f"an action must be a str, got {type(action).__name__}")
        self.turns += 1
        if UNAVAILABLE in self.task.fields:  # the server gave no prompt for this task
            return self._infra(self.task[UNAVAILABLE])
        problem = text_problem(action)
        if problem is not None:  # text JSON cannot carry: graded here, never sent
            return self._end(None, truncated=False, verdict=Verdict.fail(
                "invalid_text", None, error=problem))
        try:
            turn = self._play(action)
        except RemoteError as exc:
            if exc.infra:
                return self._infra(str(exc))
            return self._end(None, truncated=False,
                             verdict=Verdict.fail("action_refused", None, error=str(exc)))
        reward = self.env.reward_weights.get(REWARD, 0.0) * (turn.reward or 0.0)
        self.total += reward
        if turn.observation.get(INFRA_ERROR_KEY) is True:  # the server says its grading failed
            reason = one_line(RuntimeError(str(turn.observation.get("reason") or "")))
            return self._infra(f"OpenEnv server at {self.env.url} reported an infrastructure "
                               f"error: {reason or 'no reason given'}")
        if turn.done or last or self.turns >= self.env.max_turns:
            return self._end(turn, truncated=not turn.done, reward=reward)
        info = self.env.task_info(self.task)
        info.update(turns=self.turns)
        text = observation_text(turn.observation, self.env.observation_field)
        return text, reward, False, False, info

    def _play(self, action: str) -> Turn:
        env = self.env
        start = time.perf_counter()
        if self.session is None:
            self.session = env._open()
            first = self.session.reset(seed=self.task["seed"])
            shown = observation_text(first.observation, env.observation_field)
            if shown != self.task["prompt"]:
                raise RemoteError(f"OpenEnv server at {env.url} started seed "
                                  f"{self.task['seed']} with another observation than before: "
                                  "its reset does not follow the seed, so a prompt and its "
                                  "grade would not match")
        turn = self.session.step({env.action_field: action})
        self.grading_s += time.perf_counter() - start
        return turn

    def _end(self, turn: Turn | None, *, truncated: bool, reward: float = 0.0,
             verdict: Verdict | None = None) -> StepResult:
        self.close()
        observation = turn.observation if turn is not None else {}
        if verdict is None:
            passed = self._passed(observation)
            verdict = (Verdict.ok("passed") if passed else
                       Verdict.fail("not_done" if truncated else "not_passed", None))
        info = self.env.task_info(self.task)
        info.update(
            rewards={REWARD: self.total}, passed=verdict.passed, reason=verdict.reason,
            extracted=None, verdict=verdict, grading_s=Elapsed(self.grading_s),
            hit_time_limit=False, turns=self.turns, truncated_turns=truncated)
        server_rewards = observation.get("rewards")
        if isinstance(server_rewards, Mapping):  # shown only: kept where they are in range
            low, high = self.env.reward_range
            info["server_rewards"] = {
                str(k)[:REASON_CHARS]: float(v) for k, v in list(server_rewards.items())[:32]
                if reward_problem(v, low, high) is None}
        for key in ("task_id", "pack_version", "reason"):
            if isinstance(observation.get(key), str):
                info[f"server_{key}"] = observation[key][:REASON_CHARS]
        return "", reward, not truncated, truncated, info

    def _passed(self, observation: Mapping[str, Any]) -> bool:
        if self.env.reward_max is not None:
            return self.total >= self.env.reward_max - 1e-9
        if isinstance(observation.get("passed"), bool):
            return observation["passed"]
        return self.total > 0

    def _infra(self, line: str) -> StepResult:
        self.close()
        info = self.env.task_info(self.task)
        info.update(
            rewards={REWARD: 0.0}, passed=False, reason="server_error", extracted=None,
            verdict=Verdict.fail("server_error", None, error=line), grading_s=Elapsed(0.0),
            hit_time_limit=False, turns=self.turns, truncated_turns=False)
        info[INFRA_ERROR_KEY] = True
        return "", 0.0, True, False, info

    def close(self) -> None:
        self.done = True
        if self.session is not None:
            self.env._close(self.session)
            self.session = None
