"""The agent's channel with the host: its stdin (fd 0) and stdout (fd 1), each frame a 4-byte
big-endian length plus JSON. A job's request frame is followed on fd 0 by its input bytes (the
program, its files, its stdin), which are read exactly and never held whole.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any


class HostGone(Exception):
    """The host closed the channel: the agent exits (and the engine removes the container)."""


def read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``, or None when it closed first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def send(obj: Any) -> None:
    data = json.dumps(obj).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(1, view):]


def short(exc: BaseException, limit: int = 300) -> str:
    """An exception's repr, cut to fit in a reply's ``error``."""
    text = repr(exc)
    return text if len(text) <= limit else text[:limit] + "..."


class Input:
    """The job's input bytes that follow its request frame on fd 0: read exactly, never more,
    and never held whole (the program, files and stdin may be larger than our memory)."""

    def __init__(self, size: int):
        self.left = size

    def read(self, limit: int) -> bytes:
        chunk = os.read(0, min(limit, self.left))
        if not chunk:
            raise HostGone()
        self.left -= len(chunk)
        return chunk

    def discard(self) -> None:
        while self.left:
            self.read(1 << 20)


def write_inputs(root: str, specs: list[tuple[str, int]], source: Input) -> str | None:
    """Copy each (name, size) from ``source`` into ``root``; return an error or None.
    Everything is read from the channel even after an error, so the next frame stays in step."""
    error = None
    for name, size in specs:
        fh = None
        if error is None:
            try:
                path = os.path.join(root, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fh = open(path, "wb")  # noqa: SIM115 - closed below, after the copy
            except OSError as exc:
                error = f"cannot write job file {name}: {exc}"
        left = size
        while left:
            chunk = source.read(min(left, 1 << 20))
            left -= len(chunk)
            if fh is not None:
                try:
                    fh.write(chunk)
                except OSError as exc:
                    error = f"cannot write job file {name}: {exc}"
                    fh = None
        if fh is not None:
            try:
                fh.close()
            except OSError as exc:
                error = f"cannot write job file {name}: {exc}"
    return error
