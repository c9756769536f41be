"""``python -m envs serve ENV``: serve a registered env over OpenEnv (HTTP and WebSocket).

Binds 127.0.0.1 by default. Bound to any other address it needs a bearer token (``--token`` or
the ``GRPO_GYM_SERVE_TOKEN`` environment variable), unless ``--no-token`` says the network in
front of it is trusted: an open grading server lets anyone use its sandboxes.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from envs.keywords import parse_env_kwargs

TOKEN_VARIABLE = "GRPO_GYM_SERVE_TOKEN"
EXTRA_HINT = 'python -m envs serve needs the openenv extra: pip install -e ".[openenv]"'


class ServeError(ValueError):
    """A serve command that cannot start, in one line."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None, no_token: bool) -> str | None:
    """The bearer token to require, or None; refuses an unguarded non-loopback bind."""
    token = token or os.environ.get(TOKEN_VARIABLE) or None
    if token is not None and no_token:
        raise ServeError("--no-token and a token (--token or $GRPO_GYM_SERVE_TOKEN) contradict")
    if token is None and not no_token and not is_loopback(host):
        raise ServeError(f"binding {host} (not loopback) needs a bearer token: --token T or "
                         f"${TOKEN_VARIABLE}; or --no-token behind a network you trust")
    return token


def env_keywords(pack: str | None, env_kwargs: str | None) -> dict[str, Any]:
    kwargs = parse_env_kwargs(env_kwargs, ServeError)
    if pack is not None:
        if "pack" in kwargs and kwargs["pack"] != pack:
            raise ServeError(f"--pack {pack} and --env-kwargs' pack {kwargs['pack']!r} differ")
        kwargs["pack"] = pack
    return kwargs


def serve(env_id: str, *, pack: str | None = None, env_kwargs: str | None = None,
          host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 32,
          token: str | None = None, no_token: bool = False, max_body_bytes: int | None = None,
          session_timeout_s: float = 600.0, ray_address: str | None = None,
          manifest_dir: str | None = None) -> int:
    """Run the server until interrupted; exit status 2 with one line on a setup error."""
    try:
        import uvicorn

        from envs.tools.serve.app import MAX_BODY_BYTES, build_app
        from envs.tools.serve.manifest import write_manifest
    except ImportError as exc:
        if "openenv" not in str(exc) and "fastapi" not in str(exc) and "uvicorn" not in str(exc):
            raise
        print(f"error: {EXTRA_HINT} ({exc})", file=sys.stderr)
        return 2
    import gymnasium as gym

    import envs  # noqa: F401 - registers the built-in and third-party envs

    try:
        if env_id not in gym.registry:
            raise ServeError(f"unknown env '{env_id}': python -m envs list shows the ids")
        if max_sessions < 1:
            raise ServeError("--max-sessions must be at least 1")
        if not session_timeout_s >= 0:
            raise ServeError("--session-timeout takes seconds (0: never reclaim idle sessions)")
        guard = resolve_token(host, token, no_token)
        kwargs = env_keywords(pack, env_kwargs)
        limit = max_body_bytes or MAX_BODY_BYTES
        app = build_app(env_id, kwargs, max_sessions=max_sessions, token=guard,
                        max_body_bytes=limit, session_timeout_s=session_timeout_s or None,
                        ray_address=ray_address)
    except (ServeError, ValueError, TypeError, ConnectionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    served = app.state.served
    if manifest_dir is not None:
        path = write_manifest(Path(manifest_dir), served.env, port=port)
        print(f"wrote {path}")
    where = f"Ray cluster {ray_address}" if ray_address else "this machine"
    print(f"serving {env_id} (pack {served.env.pack.name}) on http://{host}:{port}, "
          f"up to {max_sessions} sessions, grading on {where}"
          + (f", idle sessions reclaimed after {session_timeout_s:g} s"
             if session_timeout_s else "")
          + (", bearer token required" if guard else ""), flush=True)
    uvicorn.run(app, host=host, port=port, ws_max_size=limit, log_level="warning")
    return 0
