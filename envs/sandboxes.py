"""The process-wide sandbox pool that every env running code shares.

One warm pool per process (``sandbox.Sandbox``), started on first use: CodeTests grades through
it and the Python tool runs its calls through it. ``shared_sandbox`` keeps the pool until the
process exits (the sandbox closes its containers at exit); ``acquire_shared`` / ``release_shared``
count users instead, so ``env.close()`` on the last env holding the pool closes it, and the next
use starts a fresh one.
"""

from __future__ import annotations

import os
import threading

from sandbox import Limits, Sandbox

#: The pool's limits: what each graded program may use unless a run asks for less time.
SANDBOX_LIMITS = Limits(wall_s=30.0, cpu_s=30.0)

_shared: Sandbox | None = None
_users = 0
_pinned = False
_lock = threading.Lock()


def _get() -> Sandbox:
    global _shared
    if _shared is None:
        _shared = Sandbox(limits=SANDBOX_LIMITS)
    return _shared


def shared_sandbox() -> Sandbox:
    """The process-wide sandbox, kept until exit (raises ``SandboxUnavailable``)."""
    global _pinned
    with _lock:
        sandbox = _get()
        _pinned = True
        return sandbox


def acquire_shared() -> Sandbox:
    """The process-wide sandbox, counted as one more user (raises ``SandboxUnavailable``)."""
    global _users
    with _lock:
        sandbox = _get()
        _users += 1
        return sandbox


def release_shared() -> None:
    """One user fewer; the last one out closes the pool, unless ``shared_sandbox`` pinned it."""
    global _shared, _users
    with _lock:
        _users = max(0, _users - 1)
        if _users == 0 and not _pinned and _shared is not None:
            _shared.close()
            _shared = None


def sandbox_outage(sandbox: Sandbox | None = None) -> str | None:
    """Why the sandbox that grading uses cannot run anything now (its engine does not answer),
    in one line; ``None`` when it answers. ``sandbox``: the one an env was given; without one,
    the shared pool, or, before it has started, the engine it would start on (pinged, so a
    check never starts a pool)."""
    if sandbox is None:
        with _lock:
            sandbox = _shared
    if sandbox is not None:
        return sandbox.unreachable()
    from sandbox.runner import engine_outage  # the local backend: the shared pool's

    return engine_outage()


def _forget_after_fork() -> None:
    """A forked child (``AsyncVectorEnv``, multiprocessing) starts its own pool on first use:
    the parent's engine connections cannot be shared (``Sandbox.run`` refuses them)."""
    global _shared, _users, _pinned, _lock
    _shared, _users, _pinned, _lock = None, 0, False, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
