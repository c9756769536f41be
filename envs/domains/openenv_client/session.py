"""One episode's connection to an OpenEnv server: a WebSocket session (OpenEnv's own
``GenericEnvClient``), with every way the far side can fail turned into a ``RemoteError``.

HTTP ``/reset`` and ``/step`` build a fresh env per request in OpenEnv, so an episode of several
steps needs the WebSocket: the server keeps one env per connection until it closes. Each
episode holds one session from its first step to its end, so a server serves as many live
episodes as its ``max_concurrent_envs`` allows; past that it refuses, and the refusal says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

#: Seconds a plain HTTP request (``/health``, ``/schema``, ``/metadata``) may take.
HTTP_TIMEOUT_S = 10.0
# "Server error: <message> (code: <CODE>)": how OpenEnv's client reports an error frame.
_SERVER_ERROR = re.compile(r"^Server error: (?P<message>.*) \(code: (?P<code>[A-Z_]+)\)$", re.S)
#: Error codes that say the action itself was refused: the policy's answer, not the server.
ACTION_REFUSED = frozenset({"VALIDATION_ERROR"})
#: Seconds a reset waits for a server at capacity to free a session, and between tries.
CAPACITY_WAIT_S = 5.0
CAPACITY_POLL_S = 0.2
#: WebSocket close code for a message over the receiver's limit (RFC 6455).
MESSAGE_TOO_BIG = 1009


class RemoteError(RuntimeError):
    """The server could not play a turn. ``infra``: it failed or cannot be reached (the sample
    says nothing about the policy); else it refused the action itself. One line, naming the
    URL."""

    def __init__(self, line: str, *, infra: bool = True, code: str | None = None):
        super().__init__(" ".join(line.split()))
        self.infra, self.code = infra, code


@dataclass(frozen=True)
class Turn:
    """What the server answered to a reset or a step."""

    observation: dict[str, Any]
    reward: float | None
    done: bool


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def get_json(url: str, path: str, max_bytes: int) -> Any:
    """GET ``url + path`` as JSON; a ``RemoteError`` naming the URL when it does not answer, or
    sends more than ``max_bytes`` (read in chunks: the rest is never buffered)."""
    try:
        with httpx.stream("GET", url + path, timeout=HTTP_TIMEOUT_S) as response:
            response.raise_for_status()
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise RemoteError(f"OpenEnv server at {url} sent more than {max_bytes} "
                                      f"bytes for {path} (max_observation_bytes): refused")
        return json.loads(body)
    except (httpx.HTTPError, ValueError) as exc:
        raise RemoteError(f"OpenEnv server at {url} did not answer {path}: {one_line(exc)}"
                          ) from None


def reward_problem(reward: Any, low: float, high: float) -> str | None:
    """Why ``reward`` is no reward (not a number, not finite, outside ``[low, high]``), or None.
    Integers compare exactly: one too large for a float is out of range, never an overflow."""
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return f"{_shown(reward)}, not a number"
    if isinstance(reward, float) and not math.isfinite(reward):
        return f"{reward!r}, not a finite number"
    if not low <= reward <= high:
        return f"{_shown(reward)}, outside the declared reward_range [{low:g}, {high:g}]"
    return None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)[:60]


class Session:
    """A WebSocket session: ``reset`` then ``step`` until done, then ``close``."""

    def __init__(self, url: str, timeout_s: float, *, max_bytes: int,
                 reward_range: tuple[float, float]):
        self.url, self.timeout_s = url, timeout_s
        self.max_bytes, self.reward_range = max_bytes, reward_range
        self._client: Any = None

    def reset(self, **kwargs: Any) -> Turn:
        """Open the session and reset it. A server at capacity is asked again for up to
        ``CAPACITY_WAIT_S``: a session closed just before may not have been freed yet."""
        deadline = time.monotonic() + min(CAPACITY_WAIT_S, self.timeout_s)
        while True:
            self._client = self._new_client()
            try:
                return self._call("reset", lambda: self._client.reset(**kwargs))
            except RemoteError as exc:
                if exc.code != "CAPACITY_REACHED" or time.monotonic() >= deadline:
                    raise
            time.sleep(CAPACITY_POLL_S)

    def _new_client(self) -> Any:
        from openenv.core.generic_client import GenericEnvClient

        # max_message_size_mb is the WebSocket's frame limit: a longer message is refused
        # from its header (close 1009), before its payload is read.
        return GenericEnvClient(base_url=self.url, connect_timeout_s=self.timeout_s,
                                message_timeout_s=self.timeout_s,
                                max_message_size_mb=self.max_bytes / 2**20).sync()

    def step(self, action: dict[str, Any]) -> Turn:
        if self._client is None:
            raise RemoteError(f"OpenEnv server at {self.url}: step on a closed session")
        return self._call("step", lambda: self._client.step(action))

    def close(self) -> None:
        """Free the server's session; never raises (a dead server has nothing to free)."""
        client, self._client = self._client, None
        if client is not None:
            # Closing a dead connection may raise anything: there is nothing left to free.
            with contextlib.suppress(Exception):
                client.close()

    def _call(self, what: str, call: Any) -> Turn:
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - classified below, never passed on raw
            self.close()
            raise self._error(what, exc) from None
        reward = result.reward
        if reward is not None and (problem := reward_problem(reward, *self.reward_range)):
            self.close()
            raise RemoteError(f"OpenEnv server at {self.url} sent the reward {problem} on "
                              f"{what}")
        observation = result.observation if isinstance(result.observation, dict) else {}
        return Turn(observation, None if reward is None else float(reward), bool(result.done))

    def _error(self, what: str, exc: Exception) -> RemoteError:
        found = _SERVER_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
        if found is not None:
            code, message = found["code"], " ".join(found["message"].split())[:300]
            if code == "CAPACITY_REACHED":
                message += (" (each live episode holds one session: serve with a larger "
                            "max_concurrent_envs, or run fewer episodes at once)")
            return RemoteError(f"OpenEnv server at {self.url} refused the {what}: {message} "
                               f"({code})", infra=code not in ACTION_REFUSED, code=code)
        sent = getattr(exc, "sent", None)  # websockets' ConnectionClosed: the close we sent
        if getattr(sent, "code", None) == MESSAGE_TOO_BIG:
            return RemoteError(f"OpenEnv server at {self.url} answered the {what} with a "
                               f"message over {self.max_bytes} bytes (max_observation_bytes): "
                               "refused unread")
        if isinstance(exc, asyncio.TimeoutError | TimeoutError):
            return RemoteError(f"OpenEnv server at {self.url} did not answer the {what} in "
                               "time (timeout=)")
        return RemoteError(f"OpenEnv server at {self.url} failed on {what}: "
                           f"{type(exc).__name__}: {one_line(exc)}")
