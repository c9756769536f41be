"""The agent's end of its zygote (``zygote``): it starts the zygote and asks it for each job.

A job may stop the zygote (same uid) before the zygote says "ok" (the job already runs): the
zygote is then woken every ``SPAWN_NUDGE_S``, ``SPAWN_NUDGES`` times, before the container is
retired (the host waits for the reply meanwhile).
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from sandbox.inside import layout

ZYGOTE_REPLY_S = 10.0  # the zygote's hello, and a job's pid once the zygote has its inputs
SPAWN_NUDGE_S, SPAWN_NUDGES = 0.1, 20  # 2 s at most: well within worker.REPLY_GRACE_S


class Zygote:
    """The agent's handle on its zygote: started from ``source`` (the zygote's bundle) with the
    jobs' environment; ``ready`` when it runs under the jobs' syscall filter."""

    def __init__(self, source: str):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.dup2(theirs.fileno(), 3)
                os.closerange(4, 65536)
                os.execve(sys.executable, [sys.executable, "-B", "-E", "-s", "-c", source],
                          layout.JOB_ENV)
            finally:
                os._exit(127)
        theirs.close()
        self.out_of_step = False  # an "ok" is owed that never came: the container must go
        self.sock.settimeout(ZYGOTE_REPLY_S)
        try:
            hello = self.sock.recv(64)
        except OSError:
            hello = b""
        # Without the filter, jobs could reach the agent and the zygote: refuse to start.
        self.filtered = hello == b"ready 1"
        self.ready = self.filtered and self.alive()

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def spawn(self, req: dict, fds: list[int]) -> int | None:
        """Start a job; return its pid (our child) or None when the zygote failed."""
        cpu = max(1, int(req["cpu_s"] + 0.999))
        disk = int(req["disk_mb"]) * 1024 * 1024
        try:
            socket.send_fds(self.sock, [b"%d %d" % (cpu, disk)], fds)
            pid, ok, nudges = None, False, 0
            while pid is None or not ok:
                try:
                    msg = self.sock.recv(64)
                except TimeoutError:
                    if pid is None:
                        raise
                    # The job runs (it sent its pid) and stopped the zygote before the zygote
                    # said "ok". Saying "not started" here would let a job turn its grade into
                    # a retry and then an infrastructure error: wake the zygote instead.
                    nudges += 1
                    if nudges > SPAWN_NUDGES:
                        self.out_of_step = True  # its "ok" may still come: retire it
                        return pid
                    os.kill(self.pid, signal.SIGCONT)
                    continue
                if not msg:
                    # The zygote is gone (a job may kill it at once); the job still runs.
                    return pid
                if msg == b"ok":
                    ok = True
                elif msg.startswith(b"pid "):
                    pid = int(msg[4:])
                    self.sock.settimeout(SPAWN_NUDGE_S)  # from here on, only "ok" is awaited
            return pid
        except (OSError, ValueError):
            return None
        finally:
            self.sock.settimeout(ZYGOTE_REPLY_S)
