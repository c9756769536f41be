"""``Sandbox(backend="ray")``: the same ``run``/``arun`` API, jobs spread over a Ray cluster.

Each verification node (``sandbox.ray_cluster``) runs one ``SandboxActor`` holding a warm local
``Sandbox`` on that node's own Docker engine; a job goes to the actor with the lowest share of
its pool in use, and Ray queues what exceeds the pools. When an actor or its node dies mid-job
the job runs again on another actor (no job code can have caused it: the program runs inside a
container, not in the actor), and comes back as ``sandbox_error`` when none is left. A dead
actor's containers go with it: each container's agent exits when the process holding its
attach socket dies, and the engine removes it (``auto_remove``).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import ray
from ray.exceptions import RayTaskError

from sandbox.base import Sandbox, SandboxUnavailable
from sandbox.limits import Limits, RunResult
from sandbox.ray_cluster import (
    LOST,
    HeadLost,
    Member,
    NodeActors,
    RayUnavailable,
    connect,
    node_capacity,
    wait_any,
)
from sandbox.runner import LocalSandbox

RETRIES = 2  # other actors a job is tried on after its actor was lost


class SandboxActor:
    """A local sandbox on the node this actor runs on (one per node)."""

    def __init__(self, limits: Limits, pool_size: int, image: str | None):
        self.sandbox = LocalSandbox(limits=limits, pool_size=pool_size, image=image)

    def describe(self) -> dict[str, Any]:
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "hostname": socket.gethostname(), "pool_size": self.sandbox.pool_size,
                "docker_host": os.environ.get("DOCKER_HOST") or "the default socket",
                "code": os.path.dirname(__file__)}  # the shipped sandbox/ (ray_cluster)

    def run(self, code: str, stdin: str | bytes, files: dict[str, str | bytes] | None,
            limits: Limits | None) -> RunResult:
        return self.sandbox.run(code, stdin=stdin, files=files, limits=limits)

    def warm(self, timeout: float | None) -> int:
        return self.sandbox.warm(timeout)

    def containers(self) -> list[str]:
        return self.sandbox.containers()

    def close(self) -> None:
        self.sandbox.close()


class RaySandbox(Sandbox):
    """What ``Sandbox(backend="ray", ray_address=...)`` returns (see the module docstring).

    ``pool_size`` is the warm pool of each node's actor (default: the CPUs Ray counts on that
    node); the attribute ``pool_size`` is their total over the cluster, the jobs it runs at once.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        pool_size: int | None = None,
        image: str | None = None,
        progress: Any = None,  # image builds happen on the nodes; nothing to show here
        backend: str = "ray",
        ray_address: str | None = None,
    ):
        self.limits = limits or Limits()
        self.image = image
        self.ray_address = ray_address
        self._closed = False
        try:
            connect(ray_address)
        except RayUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from exc

        def make(node: dict[str, Any]) -> tuple[tuple, int]:
            size = pool_size or node_capacity(node)
            return (self.limits, size, image), size

        self._actors = NodeActors(SandboxActor, make)
        try:
            self._actors.start()
        except RayUnavailable as exc:
            self._actors.close()
            raise SandboxUnavailable(str(exc)) from exc

    @property
    def pool_size(self) -> int:
        return sum(m.capacity for m in self._actors.members()) or 1

    @property
    def lost(self) -> int:
        """Actors lost mid-job so far (their jobs ran again elsewhere)."""
        return self._actors.lost_count

    def nodes(self) -> list[dict[str, Any]]:
        """What each actor reported when it started: node id, hostname, pool size, engine."""
        return [dict(m.info) for m in self._actors.members()]

    # -- running ------------------------------------------------------------------------------
    def _submit(self, code, stdin, files, limits) -> tuple[Member | None, Any]:
        member = self._actors.acquire()
        if member is None:
            return None, None
        return member, member.actor.run.remote(code, stdin, files, limits)

    def run(
        self,
        code: str,
        *,
        stdin: str | bytes = "",
        files: dict[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        """Run ``code`` on one of the cluster's sandboxes (see ``Sandbox.run``)."""
        if self._closed:
            return RunResult.infra_error("the sandbox is closed")
        error = "no sandbox actor is alive on the Ray cluster"
        for _ in range(1 + RETRIES):
            member, ref = self._submit(code, stdin, files, limits)
            if member is None:
                break
            try:
                wait_any([ref])
                return ray.get(ref)
            except HeadLost as exc:
                self._actors.drop_all(str(exc))
                return RunResult.infra_error(str(exc))
            except RayTaskError as exc:  # the job's own error (a bad file name): as local
                raise exc.cause from None
            except LOST as exc:
                error = f"lost the sandbox actor on node {member.node_id[:8]}: {_line(exc)}"
                self._actors.lost(member)
            finally:
                self._actors.release(member)
        return RunResult.infra_error(error)

    def warm(self, timeout: float | None = None) -> int:
        refs = [m.actor.warm.remote(timeout) for m in self._actors.members()]
        return sum(ray.get(refs))

    def containers(self) -> list[str]:
        refs = [m.actor.containers.remote() for m in self._actors.members()]
        return [c for ids in ray.get(refs) for c in ids]

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Remove every container of every node's sandbox and end the actors (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._actors.close()


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
