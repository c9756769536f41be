"""Waiting on things outside the test process: a free port, a live pid, a condition polled
until it holds (asynchronous cleanup, a server starting). Never a timing assertion: the
timeouts only bound how long a failing test waits."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A port nothing listens on now (a fixed one may still be held by an earlier run)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, every: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something true or ``timeout`` passes; returns its
    last value."""
    end = time.monotonic() + timeout
    while not (value := predicate()) and time.monotonic() < end:
        time.sleep(every)
    return value
