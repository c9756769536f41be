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


def get_json(url: str, path: str) -> Any:
    """GET ``url + path`` as JSON; a ``RemoteError`` naming the URL when it does not answer."""
    try:
        response = httpx.get(url + path, timeout=HTTP_TIMEOUT_S)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise RemoteError(f"OpenEnv server at {url} did not answer {path}: {one_line(exc)}"
                          ) from None


class Session:
    """A WebSocket session: ``reset`` then ``step`` until done, then ``close``."""

    def __init__(self, url: str, timeout_s: float):
        self.url, self.timeout_s = url, timeout_s
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

        return GenericEnvClient(base_url=self.url, connect_timeout_s=self.timeout_s,
                                message_timeout_s=self.timeout_s).sync()

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
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)
                                   or not math.isfinite(reward)):
            self.close()
            raise RemoteError(f"OpenEnv server at {self.url} sent the reward {reward!r} on "
                              f"{what}, not a finite number")
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
        if isinstance(exc, asyncio.TimeoutError | TimeoutError):
            return RemoteError(f"OpenEnv server at {self.url} did not answer the {what} in "
                               "time (timeout=)")
        return RemoteError(f"OpenEnv server at {self.url} failed on {what}: "
                           f"{type(exc).__name__}: {one_line(exc)}")
