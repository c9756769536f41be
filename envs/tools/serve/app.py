"""The OpenEnv app of a served grpo-gym env, built with OpenEnv's own ``create_app``.

Around OpenEnv's routes: a bearer token (every route but ``/health``, which load balancers
probe), a body limit on HTTP requests (WebSocket messages are capped by the server's
``ws_max_size``), and clear HTTP errors for what the env refuses (a step with no running
episode, an unknown task, a bad reset argument) instead of a bare 500; an internal error is a
generic 500 (its detail goes to the log).

Sessions: OpenEnv refuses a session past ``max_sessions`` with an error frame
(``CAPACITY_REACHED``) and closes at once, so a client whose first message crosses the close
reads a bare close instead. Here a WebSocket the app closes before reading a message stays open
until the client's first message arrives (``REFUSAL_GRACE_S`` at most): every refused client
reads why. Sessions idle past ``session_timeout_s`` are reclaimed: OpenEnv's reaper ends those
no connection holds (HTTP MCP ``openenv/session/create``), and a WebSocket whose client sends
nothing for that long is closed (1008, the reason says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig

from envs.episode import EpisodeError
from envs.tools.serve.environment import (
    EpisodeEnvironment,
    InternalError,
    RequestError,
    ServedEnv,
)
from envs.tools.serve.types import CompletionAction, CompletionObservation, EpisodeState
from tasks import PackError

#: Default cap on a request body and a WebSocket message: far above any completion.
MAX_BODY_BYTES = 4 << 20
#: Routes open without the token: liveness probes.
OPEN_PATHS = frozenset({"/health"})
#: Seconds a session may sit idle before it is reclaimed, unless the server says otherwise:
#: longer than a learner takes to write a multi-turn episode's next turn.
SESSION_TIMEOUT_S = 600.0
#: Seconds a refused WebSocket waits for the client's first message, so it reads the refusal.
REFUSAL_GRACE_S = 5.0
#: Close code of a WebSocket reclaimed for idling (RFC 6455: policy violation).
IDLE_CLOSE = 1008


def build_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *,
              max_sessions: int = 32, token: str | None = None,
              max_body_bytes: int = MAX_BODY_BYTES,
              session_timeout_s: float | None = SESSION_TIMEOUT_S,
              ray_address: str | None = None) -> FastAPI:
    """The app serving ``gym.make(env_id, **env_kwargs)``; ``app.state.served`` is the env,
    closed when the app shuts down. ``session_timeout_s=None`` keeps idle sessions forever."""
    if max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    if session_timeout_s is not None and not session_timeout_s > 0:
        raise ValueError("session_timeout_s must be a positive number of seconds (or None)")
    served = ServedEnv(env_id, env_kwargs, ray_address=ray_address)
    factory = functools.partial(EpisodeEnvironment, served)
    # OpenEnv names the factory in its factory errors: not the partial's repr (an address).
    factory.__name__ = EpisodeEnvironment.__name__  # type: ignore[attr-defined]
    try:
        app = create_app(
            factory, CompletionAction,
            CompletionObservation, env_name=env_id.replace("/", "-"), state_cls=EpisodeState,
            concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                 session_timeout=session_timeout_s))
    except Exception:
        served.close()
        raise
    app.state.served = served
    app.router.on_shutdown.append(served.close)
    for kind, status in ((EpisodeError, 409), (PackError, 400), (RequestError, 400),
                         (InternalError, 500)):
        app.add_exception_handler(kind, functools.partial(_error, status))
    app.add_middleware(_Guard, token=token, max_body_bytes=max_body_bytes,
                       idle_s=session_timeout_s)
    return app


async def _error(status: int, request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"{type(exc).__name__}: {exc}"}, status_code=status)


async def _watched_socket(app: Any, scope: dict, receive: Any, send: Any,
                          idle_s: float | None) -> None:
    """Run the WebSocket app with the refusal grace and the idle timeout (module doc)."""
    accepted = heard = closed = False
    pending: asyncio.Future | None = None

    async def next_message(timeout: float | None) -> dict | None:
        nonlocal pending
        if pending is None:
            pending = asyncio.ensure_future(receive())
        done, _ = await asyncio.wait({pending}, timeout=timeout)
        if not done:
            return None
        message, pending = pending.result(), None
        return message

    async def watched_receive() -> dict:
        nonlocal heard, closed
        message = await next_message(idle_s if accepted else None)
        if message is None:  # the client said nothing for idle_s: reclaim its session
            closed = True
            await send({"type": "websocket.close", "code": IDLE_CLOSE,
                        "reason": f"idle for more than {idle_s:g} s: session reclaimed"})
            return {"type": "websocket.disconnect", "code": IDLE_CLOSE}
        if message["type"] == "websocket.receive":
            heard = True
        elif message["type"] == "websocket.disconnect":
            closed = True
        return message

    async def watched_send(message: dict) -> None:
        nonlocal accepted, closed
        if closed:  # already closed here, or the client left: nothing more to say
            return
        if message["type"] == "websocket.accept":
            accepted = True
        elif message["type"] == "websocket.close" and accepted and not heard:
            # Refused before the app read a message: let the client's first message land
            # first, so it reads the error frame rather than a close racing its send.
            reply = await next_message(REFUSAL_GRACE_S)
            if reply is not None and reply["type"] == "websocket.disconnect":
                closed = True
                return
        if message["type"] == "websocket.close":
            closed = True
        await send(message)

    try:
        await app(scope, watched_receive, watched_send)
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending


class _Guard:
    """ASGI middleware: the bearer token on HTTP and WebSocket routes, and the body limit on
    HTTP requests (413 as soon as the body, declared or streamed, passes it)."""

    def __init__(self, app: Any, token: str | None, max_body_bytes: int,
                 idle_s: float | None = None):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.idle_s = idle_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and scope.get("path") not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                return await _refuse(kind, send, 401, "missing or wrong bearer token "
                                     "(Authorization: Bearer <token>)")
        if kind == "websocket":
            return await _watched_socket(self.app, scope, receive, send, self.idle_s)
        declared = headers.get(b"content-length")
        limit = self.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await _refuse(kind, send, 413, f"request body of {int(declared)} bytes is "
                                 f"over the limit of {limit} bytes")
        seen = 0
        too_big = False

        async def counted() -> dict:
            nonlocal seen, too_big
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    too_big = True
                    raise _BodyTooLarge
            return message

        started = False

        async def tracked(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _BodyTooLarge:
            if not started:
                await _refuse(kind, send, 413, f"request body is over the limit of {limit} "
                              "bytes")
        except Exception:
            if too_big and not started:
                await _refuse(kind, send, 413, f"request body is over the limit of {limit} "
                              "bytes")
            else:
                raise


class _BodyTooLarge(Exception):
    pass


async def _refuse(kind: str, send: Any, status: int, detail: str) -> None:
    if kind == "websocket":  # refused before the handshake completes
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
        return
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
