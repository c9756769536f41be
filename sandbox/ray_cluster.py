"""Joining a Ray cluster and keeping one actor on each of its verification nodes.

``NodeActors`` places one actor per node that declares the ``docker`` resource (every alive node
when none does) with Ray's node-affinity scheduling, replaces an actor whose process died while
its node lives on, starts actors on nodes that join later, and drops those of dead nodes. Both
the Ray sandbox backend (``sandbox.ray_backend``) and grading on Ray (``envs.ray_scoring``) keep
their actors this way.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.core.generated import gcs_pb2
from ray.exceptions import (
    ActorUnschedulableError,
    LocalRayletDiedError,
    NodeDiedError,
    ObjectLostError,
    RayActorError,
    WorkerCrashedError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sandbox.ray_address import GRADING_RESOURCE, check_address, probe
from sandbox.ray_auth import auth_problem

#: What ``ray.get`` raises when the actor (its process or its node) went away mid-call; the
#: call's work may be retried elsewhere. Exceptions of the work itself propagate unchanged.
LOST = (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError,
        LocalRayletDiedError, ActorUnschedulableError)
#: A local instance started for ``address=None`` needs little shared memory: jobs are small.
LOCAL_OBJECT_STORE_BYTES = 200 << 20
#: The project's packages the workers import (grading builds envs over task packs); the learner
#: stays on the driver.
WORKER_PACKAGES = ("tasks", "envs", "sandbox")
REFRESH_S = 10.0  # how often the set of nodes is looked at again while jobs flow
START_TIMEOUT_S = 600.0  # a node's first actor may build the sandbox image
FAILED_RETRY_S = 60.0  # a node whose actor failed to start is tried again this often
STRAGGLER_S = 30.0  # how long start() waits for the other nodes once one actor is up
#: How often a wait on the cluster checks that its head still answers. With the head (its GCS)
#: gone, Ray's GCS calls block and its core worker ends this process after 60 s
#: (``gcs_rpc_server_reconnect_timeout_s``), before any error of ours could be printed.
HEAD_CHECK_S = 5.0
ALIVE = gcs_pb2.GcsNodeInfo.GcsNodeState.Value("ALIVE")


class RayUnavailable(ConnectionError):
    """No Ray cluster at the address, or none of its nodes could host an actor."""


class HeadLost(RayUnavailable):
    """The head of the joined cluster stopped answering mid-run."""


def head_outage() -> str | None:
    """Why the joined cluster's head (its GCS port) refuses a TCP connection, in one line, or
    ``None`` when it answers (or when this process cannot tell: Ray Client, not connected)."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - Ray Client mode or not connected: nothing to probe
        return None
    if not address:
        return None
    try:
        probe(address)
    except ConnectionError as exc:
        return f"the Ray cluster's head does not answer: {exc}"
    return None


def wait_any(refs: list[Any]) -> list[Any]:
    """``ray.wait(refs, num_returns=1)``, checking every ``HEAD_CHECK_S`` that the head still
    answers; raises ``HeadLost`` once it does not (see ``HEAD_CHECK_S`` for why not wait on)."""
    while True:
        done, _ = ray.wait(refs, num_returns=1, timeout=HEAD_CHECK_S)
        if done:
            return done
        if (why := head_outage()) is not None:
            raise HeadLost(why)


def connect(address: str | None) -> None:
    """Join the cluster at ``address`` (``None`` starts a local instance) unless this process
    is connected already; raises ``RayUnavailable`` with a one-line reason. Joining ships this
    process's copy of the project's packages to the workers (``code_env``)."""
    if ray.is_initialized():
        return
    if address is None:
        ray.init(resources={GRADING_RESOURCE: 1}, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                 include_dashboard=False, log_to_driver=False)
        return
    try:
        probe(check_address(address))
    except Exception as exc:  # noqa: BLE001 - a malformed or dead address
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {exc}") from exc
    # A head that wants a token answers TCP, and ray.init would report "Failed to connect".
    problem = auth_problem(address)
    if problem is not None:
        raise RayUnavailable(problem)
    try:
        ray.init(address=address, log_to_driver=False, runtime_env=code_env())
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds here
        text = " ".join(str(exc).split())
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {text}") from exc


def code_env() -> dict[str, Any]:
    """A runtime env shipping this process's own copy of the project's packages to the
    workers (Ray's ``py_modules``; Ray takes local folders only when a process joins): every
    node runs the caller's code, whatever version it has installed. Nodes still need the
    dependencies (``pip install grpo-gym[ray]``)."""
    folders = []
    for name in WORKER_PACKAGES:  # located, not imported: sandbox/ imports none of the others
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders.append(list(spec.submodule_search_locations)[0])
    return {"py_modules": folders, "excludes": ["__pycache__", "*.pyc"]}


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's alive nodes, each as the ``ray.nodes()`` entry's ``NodeID``, ``Alive``,
    ``Resources`` and ``NodeManagerAddress``. Raises ``HeadLost`` when the head does not answer.

    Asked through the GCS client with a timeout, not ``ray.nodes()``: that one's C++ accessor
    aborts the whole process (a failed ``RAY_CHECK``, no Python exception) when the head
    cancels the call while shutting down, before any error of ours could be printed."""
    if (why := head_outage()) is not None:
        raise HeadLost(why)
    gcs = getattr(ray._private.worker.global_worker, "gcs_client", None)
    if gcs is None:  # Ray Client (ray://): the client server asks the head on our behalf
        return [n for n in ray.nodes() if n.get("Alive")]
    try:
        table = gcs.get_all_node_info(timeout=HEAD_CHECK_S)
    except Exception as exc:  # noqa: BLE001 - RpcError, a timeout: the head went mid-call
        raise HeadLost(f"the Ray cluster's head does not answer: {' '.join(str(exc).split())}"
                       ) from exc
    return [{"NodeID": info.node_id.hex(), "Alive": True,
             "Resources": dict(info.resources_total),
             "NodeManagerAddress": info.node_manager_address}
            for info in table.values() if info.state == ALIVE]


def grading_nodes() -> list[dict[str, Any]]:
    """The alive nodes that declare the ``docker`` resource; every alive node when none does.
    Raises ``HeadLost`` when the head does not answer."""
    alive = alive_nodes()
    marked = [n for n in alive if n["Resources"].get(GRADING_RESOURCE, 0) > 0]
    return marked or alive


@dataclass
class Member:
    node_id: str
    actor: Any  # ray.actor.ActorHandle
    capacity: int  # calls the actor runs at once (its max_concurrency)
    ready: Any  # ObjectRef of the actor's ``describe()``: resolves once it is constructed
    info: dict[str, Any] = field(default_factory=dict)
    busy: int = 0


class NodeActors:
    """One actor of ``actor_class`` per verification node (see the module docstring).

    ``make(node) -> (args, capacity)`` gives the constructor arguments and the concurrency of
    the actor for a node (a ``ray.nodes()`` entry). The class needs ``describe() -> dict`` (cheap)
    and ``close()`` (release what it holds) methods.
    """

    def __init__(self, actor_class: type, make: Callable[[dict[str, Any]], tuple[tuple, int]]):
        self._remote: Any = ray.remote(actor_class)
        self._make = make
        self._lock = threading.Lock()
        self._pending: dict[str, Member] = {}
        self._ready: dict[str, Member] = {}
        self._failures: dict[str, str] = {}  # node id -> why its last actor failed to start
        self._failed_at: dict[str, float] = {}  # ... and when: such a node is retried slowly
        self._name = actor_class.__name__
        self._last_refresh = 0.0
        self._closed = False
        self.lost_count = 0  # actors lost while in use (for diagnostics and tests)

    # -- membership ---------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> list[Member]:
        """Start the actors and wait for them; raises ``RayUnavailable`` when none comes up."""
        self.refresh(force=True)
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            if self._ready:  # the others join when they are up (see acquire)
                deadline = min(deadline, time.monotonic() + STRAGGLER_S)
            self._promote(wait_s=min(1.0, max(0.0, deadline - time.monotonic())))
        if not self._ready:
            why = "; ".join(f"node {n[:8]}: {e}" for n, e in self._failures.items())
            raise RayUnavailable(f"no node of the Ray cluster could start a "
                                 f"{self._name} actor" + (f" ({why})" if why else " in time"))
        return self.members()

    def refresh(self, force: bool = False) -> None:
        """Start actors on verification nodes without one; forget those of dead nodes."""
        now = time.monotonic()
        if self._closed or (not force and now - self._last_refresh < REFRESH_S):
            return
        self._last_refresh = now
        try:
            nodes = {n["NodeID"]: n for n in grading_nodes()}
        except HeadLost as exc:
            self.drop_all(str(exc))
            return
        with self._lock:
            for node_id in [i for i in self._ready if i not in nodes]:
                self._forget(self._ready.pop(node_id))
            for node_id, node in nodes.items():
                if node_id in self._ready or node_id in self._pending \
                        or now - self._failed_at.get(node_id, -FAILED_RETRY_S) < FAILED_RETRY_S:
                    continue
                self._pending[node_id] = self._start_on(node)
        self._promote(wait_s=0.0)

    def _start_on(self, node: dict[str, Any]) -> Member:
        args, capacity = self._make(node)
        actor = self._remote.options(
            num_cpus=0,  # its containers use the node's CPUs, outside Ray's accounting
            max_concurrency=capacity,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(*args)
        return Member(node["NodeID"], actor, capacity, actor.describe.remote())

    def _promote(self, wait_s: float) -> None:
        """Move pending actors whose construction finished into the ready set."""
        with self._lock:
            pending = list(self._pending.values())
        if not pending:
            return
        done, _ = ray.wait([m.ready for m in pending], num_returns=len(pending), timeout=wait_s)
        finished = {ref for ref in done}
        for m in pending:
            if m.ready not in finished:
                continue
            try:
                m.info = ray.get(m.ready)
            except Exception as exc:  # noqa: BLE001 - the constructor's error, whatever it is
                with self._lock:
                    self._pending.pop(m.node_id, None)
                    self._failures[m.node_id] = " ".join(str(exc).split())[-300:]
                    self._failed_at[m.node_id] = time.monotonic()
                self._forget(m)
                continue
            with self._lock:
                if self._pending.pop(m.node_id, None) is m and not self._closed:
                    self._ready[m.node_id] = m
                    self._failures.pop(m.node_id, None)

    def lost(self, member: Member) -> None:
        """``member``'s actor died or became unreachable: drop it (and kill it, so that if it
        comes back its containers go) and look for a replacement at once."""
        with self._lock:
            if self._ready.get(member.node_id) is member:
                del self._ready[member.node_id]
                self.lost_count += 1
        self._forget(member)
        self.refresh(force=True)

    def drop_all(self, why: str) -> None:
        """The head is gone: no actor can be reached, none is killed (that needs the head)."""
        with self._lock:
            for member in [*self._ready.values(), *self._pending.values()]:
                self._failures[member.node_id] = why
            self._ready.clear()
            self._pending.clear()

    def _forget(self, member: Member) -> None:
        with contextlib.suppress(Exception):
            ray.kill(member.actor, no_restart=True)

    # -- use ----------------------------------------------------------------------------------
    def members(self) -> list[Member]:
        with self._lock:
            return list(self._ready.values())

    def acquire(self, within_capacity: bool = False) -> Member | None:
        """The ready actor with the lowest share of its capacity in use (``None``: none is
        ready, or with ``within_capacity`` all are full). Release it after the call."""
        self.refresh()
        self._promote(wait_s=0.0)
        with self._lock:
            ready = [m for m in self._ready.values()
                     if not within_capacity or m.busy < m.capacity]
            if not ready:
                return None
            best = min(ready, key=lambda m: m.busy / m.capacity)
            best.busy += 1
            return best

    def release(self, member: Member) -> None:
        with self._lock:
            member.busy -= 1

    def close(self, timeout: float = 60.0) -> None:
        """Ask every actor to release what it holds, then end it. Never raises."""
        with self._lock:
            self._closed = True
            members = list(self._ready.values()) + list(self._pending.values())
            self._ready.clear()
            self._pending.clear()
        if head_outage() is not None:  # nothing to ask, and waiting would block on the head
            return
        refs = []
        for m in members:
            with contextlib.suppress(Exception):
                refs.append(m.actor.close.remote())
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for m in members:
            self._forget(m)


def node_capacity(node: dict[str, Any]) -> int:
    """The CPUs Ray counts on a node (at least 1)."""
    return max(1, int(node.get("Resources", {}).get("CPU", 1)))
