"""Scorers that misbehave, for the reasoning-gym scorer worker's tests (run in the worker)."""

from __future__ import annotations

import contextlib
import time
from typing import Any


def hang(answer: str, entry: dict[str, Any]) -> float:
    time.sleep(3600)
    return 1.0


def crash(answer: str, entry: dict[str, Any]) -> float:
    raise RuntimeError("upstream scorer bug")


def not_a_score(answer: str, entry: dict[str, Any]) -> Any:
    return float("nan")


def pays_anything(answer: str, entry: dict[str, Any]) -> float:
    return 1.0


def evals(answer: str, entry: dict[str, Any]) -> float:
    """A scorer with a hole, as several of reasoning-gym's have: it runs the answer."""
    return float(eval(answer) or 0.0)  # noqa: S307 - the point of the test


def pid(answer: str, entry: dict[str, Any]) -> float:
    """The scoring process's id, as a score below 1 (pids stay below 2**22)."""
    import os

    return os.getpid() / 2**23


def reach_worker(answer: str, entry: dict[str, Any]) -> float:
    """What escaped code would try next: write forged, framed replies ``(id, "ok", 1.0)`` for
    every likely request id into each of the worker's descriptors, reopened through /proc.
    Returns how many writes got through (0.0 when all were refused)."""
    import os
    import pickle
    import struct

    forged = b"".join(struct.pack("!i", len(m)) + m for m in
                      (pickle.dumps((rid, "ok", 1.0)) for rid in range(1, 400)))
    through = 0
    parent = os.getppid()
    try:
        names = os.listdir(f"/proc/{parent}/fd")
    except OSError:
        names = []
    for name in names:
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND):
            try:
                fd = os.open(f"/proc/{parent}/fd/{name}", flags | os.O_NONBLOCK)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                through += os.write(fd, forged) > 0
    return float(through)


def open_descriptors(answer: str, entry: dict[str, Any]) -> float:
    """How many descriptors the scoring process holds above stdin/stdout/stderr, over 1000 (a
    pre-forked child keeps only its own request and reply pipes: 2). -1 when it cannot look."""
    import os

    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return -1.0
    return len([fd for fd in fds if fd > 2]) / 1000
