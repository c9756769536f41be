"""Ray cluster addresses: checked for form without importing Ray, probed before joining.

Kept free of heavy imports so command lines can check ``--ray-address`` before anything loads.
"""

from __future__ import annotations

import socket

#: The custom resource a node declares to host verification (``ray start --resources
#: '{"docker": 1}'``): one sandbox or grading actor per such node. With no node declaring it,
#: every alive node is used.
GRADING_RESOURCE = "docker"
PROBE_TIMEOUT_S = 5.0


def check_address(address: str) -> str:
    """``address`` if it names a cluster (``auto``, ``host:port``, ``ray://host:port``); else
    a one-line ``ValueError`` saying what is expected."""
    if address == "auto":
        return address
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in hostport:
        raise ValueError(f"--ray-address {address!r} is not a Ray address: give 'auto' (the "
                         "cluster this machine is part of), HOST:PORT of the head node (e.g. "
                         "10.0.0.1:6379) or ray://HOST:10001 (Ray Client)")
    return address


def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise ``ConnectionError`` unless something listens at a ``host:port`` address; Ray's
    own connect waits minutes on a dead address, so it is tried first."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port} ({exc})") from exc
