"""``python -m sandbox doctor --ray-address ADDR``: the doctor's checks on every node of a cluster.

Each alive node runs ``sandbox.doctor.diagnose`` in a Ray task pinned to it (node-affinity
scheduling), so the report shows each node's own Docker engine and image.
"""

from __future__ import annotations

import socket
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sandbox.ray_address import GRADING_RESOURCE
from sandbox.ray_cluster import alive_nodes, connect, grading_nodes

NODE_TIMEOUT_S = 60.0


def _diagnose_here() -> tuple[str, list[tuple[bool, str]]]:
    from sandbox.doctor import diagnose

    return socket.gethostname(), diagnose()


def diagnose_cluster(address: str) -> list[tuple[bool, str]]:
    """(ok, message) lines: one per node, then that node's checks (indented)."""
    connect(address)
    nodes = alive_nodes()
    graders = {n["NodeID"] for n in grading_nodes()}
    remote = ray.remote(_diagnose_here)
    refs: dict[str, Any] = {
        n["NodeID"]: remote.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], False),
        ).remote() for n in nodes}
    ray.wait(list(refs.values()), num_returns=len(refs), timeout=NODE_TIMEOUT_S)
    marked = any(n.get("Resources", {}).get(GRADING_RESOURCE, 0) > 0 for n in nodes)
    lines: list[tuple[bool, str]] = [(True, f"Ray cluster at {address}: {len(nodes)} alive "
                                           f"node(s), {len(graders)} verifying" + (
        "" if marked else f" (no node declares the '{GRADING_RESOURCE}' resource: all verify)"))]
    for n in nodes:
        role = "verifies" if n["NodeID"] in graders else f"no '{GRADING_RESOURCE}' resource"
        head = f"node {n['NodeID'][:8]} at {n.get('NodeManagerAddress', '?')} ({role})"
        try:
            host, checks = ray.get(refs[n["NodeID"]], timeout=0)
        except Exception as exc:  # noqa: BLE001 - a node that cannot run the check is reported
            lines.append((False, f"{head}: did not answer ({' '.join(str(exc).split())[:200]})"))
            continue
        ok = all(passed for passed, _ in checks)
        lines.append((ok or n["NodeID"] not in graders, f"{head}, host {host}:"))
        lines += [(passed, "  " + message) for passed, message in checks]
    return lines
