"""The OpenEnv app of a served grpo-gym env, built with OpenEnv's own ``create_app``.

Around OpenEnv's routes: a bearer token (every route but ``/health``, which load balancers
probe), a body limit on HTTP requests (WebSocket messages are capped by the server's
``ws_max_size``), and clear HTTP errors for what the env refuses (a step with no running
episode, an unknown task, a bad reset argument) instead of a bare 500.
"""

from __future__ import annotations

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
from envs.openenv_server.environment import EpisodeEnvironment, ServedEnv
from envs.openenv_server.types import CompletionAction, CompletionObservation, EpisodeState
from tasks import PackError

#: Default cap on a request body and a WebSocket message: far above any completion.
MAX_BODY_BYTES = 4 << 20
#: Routes open without the token: liveness probes.
OPEN_PATHS = frozenset({"/health"})


def build_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *,
              max_sessions: int = 32, token: str | None = None,
              max_body_bytes: int = MAX_BODY_BYTES, session_timeout_s: float | None = None,
              ray_address: str | None = None) -> FastAPI:
    """The app serving ``gym.make(env_id, **env_kwargs)``; ``app.state.served`` is the env,
    closed when the app shuts down."""
    if max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    served = ServedEnv(env_id, env_kwargs, ray_address=ray_address)
    try:
        app = create_app(
            functools.partial(EpisodeEnvironment, served), CompletionAction,
            CompletionObservation, env_name=env_id.replace("/", "-"), state_cls=EpisodeState,
            concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                 session_timeout=session_timeout_s))
    except Exception:
        served.close()
        raise
    app.state.served = served
    app.router.on_shutdown.append(served.close)
    for kind, status in ((EpisodeError, 409), (PackError, 400), (ValueError, 400),
                         (TypeError, 400), (KeyError, 400)):
        app.add_exception_handler(kind, functools.partial(_error, status))
    app.add_middleware(_Guard, token=token, max_body_bytes=max_body_bytes)
    return app


async def _error(status: int, request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"{type(exc).__name__}: {exc}"}, status_code=status)


class _Guard:
    """ASGI middleware: the bearer token on HTTP and WebSocket routes, and the body limit on
    HTTP requests (413 as soon as the body, declared or streamed, passes it)."""

    def __init__(self, app: Any, token: str | None, max_body_bytes: int):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_body_bytes = max_body_bytes

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
            return await self.app(scope, receive, send)
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
