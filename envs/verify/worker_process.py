"""The project's one way to start a worker process: a fresh interpreter running the worker's own
entry module (``sys.executable -m MODULE``), spoken to with ``multiprocessing``'s ``Connection``
framing over the child's stdin and stdout.

Why not ``multiprocessing``'s spawn or forkserver: they re-run the caller's ``__main__`` in the
child, so a user's script without a ``__main__`` guard runs twice (and ``python - < script.py``
dies there with ``FileNotFoundError: '<stdin>'``). Why not ``fork``: unsafe once the caller holds
threads or CUDA state. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerProcess:
    """``python -m module *args`` with ``tx`` (to its stdin) and ``rx`` (from its stdout); the
    constructor waits up to ``ready_s`` for its first message, ``("ready", pid)``."""

    def __init__(self, module: str, args: tuple[str, ...] = (), ready_s: float = 120.0,
                 env: dict[str, str] | None = None) -> None:
        environ = dict(os.environ)
        environ["PYTHONPATH"] = REPO_ROOT + os.pathsep + environ.get("PYTHONPATH", "")
        environ.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environ, cwd=REPO_ROOT,
            close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.tx = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.rx = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.pid = self.proc.pid
        try:
            ready: Any = self.rx.poll(ready_s) and self.rx.recv()
        except (EOFError, OSError):
            ready = None
        if not (isinstance(ready, tuple) and ready and ready[0] == "ready"):
            self.kill()
            raise RuntimeError(f"the worker {module} did not start within {ready_s:g} s")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for conn in (self.tx, self.rx):
            with contextlib.suppress(OSError):
                conn.close()


def worker_connections() -> tuple[Connection, Connection]:
    """In the worker's entry module: ``(requests, replies)``, on new descriptors. fd 1 then points
    at stderr (whatever a library prints must not enter the protocol) and fd 0 at ``/dev/null``
    (a child the worker forks holds no copy of the request pipe under a well-known number)."""
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return Connection(in_fd, writable=False), Connection(out_fd, readable=False)
