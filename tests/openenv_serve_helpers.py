"""Served grpo-gym envs for the OpenEnv tests: the app of ``python -m envs serve`` run by
uvicorn in a thread on a free loopback port, stopped (and its env closed) on exit."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from envs.tools.serve.app import MAX_BODY_BYTES, build_app

START_WITHIN_S = 60.0


@contextlib.contextmanager
def served(env_id: str, env_kwargs: dict[str, Any] | None = None, **options: Any
           ) -> Iterator[str]:
    """Serve ``env_id``; yields its base URL (``http://127.0.0.1:PORT``)."""
    app = build_app(env_id, env_kwargs, **options)
    limit = options.get("max_body_bytes", MAX_BODY_BYTES)
    with serve_app(app, f"the test server for {env_id}", ws_max_size=limit) as url:
        yield url


@contextlib.contextmanager
def serve_app(app: Any, what: str, *, ws_max_size: int) -> Iterator[str]:
    """Run an ASGI ``app`` with uvicorn in a thread on a free loopback port; yields its base
    URL and stops it on exit."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, ws_max_size=ws_max_size,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_WITHIN_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
