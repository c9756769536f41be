"""Messages between the trusted test process and the program's process: a 4-byte big-endian
length, then that many bytes of JSON."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAX_FRAME = 16 << 20  # a larger reply is refused (the program returned too much)


class ChannelClosed(Exception):
    """The other side closed its end, or sent what is not a frame."""


class FrameTooLarge(ChannelClosed):
    """A frame longer than ``MAX_FRAME``."""


class Timeout(Exception):
    """No whole frame before the deadline."""


def write(fd: int, obj: Any) -> None:
    data = json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:  # BrokenPipeError: the reader is gone
        raise ChannelClosed(str(exc)) from None


def read(fd: int, deadline: float | None = None, max_bytes: int = MAX_FRAME) -> Any:
    """The next message; ``deadline`` is a ``time.monotonic()`` value (None: wait for ever)."""
    size = struct.unpack(">I", _exactly(fd, 4, deadline))[0]
    if size > max_bytes:
        raise FrameTooLarge(f"a message of {size} bytes (at most {max_bytes})")
    try:
        return json.loads(_exactly(fd, size, deadline))
    except (ValueError, RecursionError) as exc:
        raise ChannelClosed(f"not a message: {type(exc).__name__}") from None


def _exactly(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Timeout()
        try:
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
        except OSError as exc:
            raise ChannelClosed(str(exc)) from None
        if not chunk:
            raise ChannelClosed("the other side closed the channel")
        buf += chunk
    return bytes(buf)
