"""A running job's pipes, pumped by the agent until the job exits or hits a limit (``Relay``)."""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from typing import TYPE_CHECKING

from sandbox.inside import processes
from sandbox.inside.channel import Input

if TYPE_CHECKING:
    import resource

CHUNK = 65536


class Relay:
    """The pipes of a running job: stdin relayed from the channel (fd 0) one chunk at a time
    (a chunk is read when none is pending, written when the pipe has room), stdout and stderr
    collected up to ``output_bytes``; ``status`` is set when a limit is hit, ``wait_status``
    once the job has exited."""

    def __init__(self, req: dict, pid: int, stdin: Input, stdin_w: int, out_r: int,
                 err_r: int, start: float):
        self.pid, self.stdin = pid, stdin
        self.stdin_w: int | None = stdin_w  # None once closed
        self.out_r, self.err_r = out_r, err_r
        self.cap = int(req["output_bytes"])
        self.deadline = start + float(req["wall_s"])
        self.pidfd: int | None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        self.sel = selectors.DefaultSelector()
        self.outputs = {out_r: bytearray(), err_r: bytearray()}
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
        self.pending = memoryview(b"")
        self.feeding = True
        if stdin.left:
            os.set_blocking(stdin_w, False)
            self.sel.register(0, selectors.EVENT_READ)
        else:
            os.close(stdin_w)
            self.stdin_w = None
        if self.pidfd is not None:
            self.sel.register(self.pidfd, selectors.EVENT_READ)
        self.status: str | None = None
        self.truncated = False
        self.wait_status: int | None = None
        self.rusage: resource.struct_rusage | None = None

    def pump(self) -> None:
        """Until the job exits (its pipes then drained, without waiting for processes it left
        behind: they are killed after), hits the output limit or runs out of wall time."""
        while True:
            if self.wait_status is None:
                done = processes.try_wait(self.pid)
                if done is not None:
                    self.wait_status, self.rusage = done
            open_reads = [fd for fd in self.outputs if fd in self.sel.get_map()]
            if self.wait_status is not None:
                for fd in open_reads:
                    self.drain(fd)
                return
            if self.status is not None:
                return
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                self.status = "timeout"
                return
            if self.pidfd is None:
                timeout = min(timeout, 0.005)
            for key, _ in self.sel.select(timeout):
                self.ready(key.fd)
                if self.status is not None:
                    break

    def ready(self, fd: int) -> None:
        if fd == self.pidfd:
            self.sel.unregister(fd)
            os.close(fd)
            self.pidfd = None
            done = processes.wait(self.pid, 5.0)
            if done is not None:
                self.wait_status, self.rusage = done
        elif fd == 0:
            # the channel is watched only while stdin_w is open (fed one chunk at a time)
            assert self.stdin_w is not None
            self.pending = memoryview(self.stdin.read(CHUNK))
            self.sel.unregister(0)
            self.sel.register(self.stdin_w, selectors.EVENT_WRITE)
        elif fd == self.stdin_w:
            self.feed()
        elif fd in self.outputs:
            self.drain(fd)

    def feed(self) -> None:
        stdin_w = self.stdin_w
        assert stdin_w is not None  # only called when stdin_w is ready, so still open
        try:
            self.pending = self.pending[os.write(stdin_w, self.pending):]
        except BlockingIOError:
            return
        except OSError:  # the job closed its stdin: the rest is discarded by the caller
            self.pending = self.pending[:0]
            self.feeding = False
        if not self.pending:
            self.sel.unregister(stdin_w)
            if self.feeding and self.stdin.left:
                self.sel.register(0, selectors.EVENT_READ)
            else:
                os.close(stdin_w)
                self.stdin_w = None

    def drain(self, fd: int) -> bool:
        """Read what ``fd`` holds; False once it is closed or over the output limit."""
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                self.sel.unregister(fd)
                os.close(fd)
                return False
            buf = self.outputs[fd]
            room = self.cap - len(buf)
            if len(chunk) > room:
                buf += chunk[:max(room, 0)]
                self.truncated = True
                self.status = "output_limit"
                return False
            buf += chunk

    def close(self) -> None:
        for fd in [key.fd for key in self.sel.get_map().values()]:  # ints: all we register
            try:
                self.sel.unregister(fd)
                if fd not in (0, self.stdin_w):  # the channel stays open; stdin_w is closed below
                    os.close(fd)
            except (OSError, KeyError, ValueError):
                pass
        self.sel.close()
        if self.stdin_w is not None:
            with contextlib.suppress(OSError):
                os.close(self.stdin_w)
