"""A server the env starts itself (``launch_command``): a child process in its own process
group, ready once ``/health`` answers, stopped with the env (``close``) or at interpreter exit.

The wait is bounded (``launch_timeout``); a command that exits or never answers is a one-line
``ServerStartError`` with the last lines it wrote to stderr. Stopping sends SIGTERM to the
whole group (a shell's children too), then SIGKILL after a grace period, so nothing is left.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence

import httpx

#: Seconds between ``/health`` probes while a server starts.
POLL_S = 0.2
#: Seconds a stopped server gets to exit on SIGTERM before SIGKILL.
GRACE_S = 5.0
#: Lines of the command's stderr an error shows.
TAIL_LINES = 3

_live: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


class ServerStartError(RuntimeError):
    """The launch command did not bring up a server that answers ``/health``."""


class ServerProcess:
    """``command`` (a shell line, or an argument list run as is) serving ``url``."""

    def __init__(self, command: str | Sequence[str], url: str, timeout_s: float):
        self.command = command if isinstance(command, str) else shlex.join(command)
        self.url = url
        # stderr to a file, not a pipe: a chatty server never blocks on a full pipe.
        self._stderr = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed in stop()
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            command, shell=isinstance(command, str), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._stderr, start_new_session=True)
        _live.add(self)
        try:
            self._wait_healthy(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerStartError(f"launch_command `{self.command}` exited with code "
                                       f"{code} before {self.url}/health answered"
                                       f"{self.stderr_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                raise ServerStartError(f"launch_command `{self.command}` started, but "
                                       f"{self.url}/health did not answer within {timeout_s:g} "
                                       f"s (launch_timeout){self.stderr_tail()}")
            time.sleep(POLL_S)

    def stderr_tail(self) -> str:
        """'; its stderr ended: <last lines joined by ' | '>', or '' when it wrote none."""
        try:
            self._stderr.seek(0)
            lines = [ln.strip() for ln in self._stderr.read().decode(errors="replace")
                     .splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        tail = collections.deque(lines, maxlen=TAIL_LINES)
        return f"; its stderr ended: {' | '.join(tail)}" if tail else ""

    def exited(self) -> str | None:
        """Why the server is gone (one line), or None while it runs."""
        code = self.process.poll()
        if code is None:
            return None
        return (f"the OpenEnv server at {self.url} started by `{self.command}` exited with "
                f"code {code}{self.stderr_tail()}")

    def stop(self) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after ``GRACE_S``."""
        with self._lock:
            if self.process.poll() is None:
                _signal_group(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(GRACE_S)
                except subprocess.TimeoutExpired:
                    _signal_group(self.process.pid, signal.SIGKILL)
                    self.process.wait()
            # Children the shell started may outlive it: the group goes either way.
            _signal_group(self.process.pid, signal.SIGKILL)
            _live.discard(self)
            self._stderr.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop every server an env started and did not close."""
    for server in list(_live):
        server.stop()
