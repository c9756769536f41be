"""Grading on a Ray cluster: ``RayScorer(env, address).score_many(tasks, completions)``.

Each verification node (``sandbox.ray_cluster``: the nodes declaring the ``docker`` resource)
runs one ``GradingActor`` that builds the same env from its gymnasium id and keyword arguments
and grades through ``envs.grading.grade_batch`` on that node: code in the node's own sandbox pool, math in the
node's checker worker processes, JSON in the actor. The results, ``(reward, info)`` pairs, are
those local grading returns.

A batch is cut into chunks that are fed to the actors as they free up (at most as many in flight
per actor as its node has CPUs). A chunk whose actor or node dies is graded again on another
actor; when no actor is left its samples come back as infrastructure errors
(``envs.grading.is_infra_error``), which trainers drop instead of scoring 0.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Sequence
from typing import Any

try:
    import ray
    from ray.exceptions import RayTaskError
except ImportError as _missing:  # the message names the extra (sandbox.ray_cluster needs it too)
    from envs.extras import require

    require("ray", "ray", "grading on a Ray cluster (--ray-address, Sandbox(backend='ray'))")
    raise _missing  # ray is there but broken: its own error

from envs.base import TaskEnv, make_task_env
from envs.grading import Result, check_batch, grade_batch, infra_failure_info
from sandbox.ray_address import check_address, probe
from sandbox.ray_cluster import (
    LOST,
    HeadLost,
    Member,
    NodeActors,
    connect,
    node_capacity,
    wait_any,
)
from tasks import Task

RETRIES = 2  # other actors a chunk is tried on after its actor was lost
CHUNKS_PER_SLOT = 2  # chunks per grading slot of the cluster: small enough to balance the load


class GradingActor:
    """One env on one node, grading chunks of (task id, completion) pairs."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]):
        # ``import envs`` above registered grpo/* and the third-party envs.
        self.env: TaskEnv = make_task_env(env_id, **env_kwargs)

    def describe(self) -> dict[str, Any]:
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "hostname": socket.gethostname()}

    def score(self, task_ids: list[str], completions: list[str]
              ) -> list[Result]:
        # The one grading door: a pair whose grading raised is that pair's result.
        return grade_batch(self.env, task_ids, completions)

    def close(self) -> None:
        # A graceful exit runs the process's exit hooks: the code envs' sandbox removes its
        # containers and the math checker stops its workers.
        ray.actor.exit_actor()


class RayScorer:
    """Grades for ``env`` (built with ``gym.make``, whose id and kwargs the actors reuse) on
    the Ray cluster at ``address`` (``None``: a local instance; ``"auto"``, ``HOST:PORT``,
    ``ray://HOST:PORT``). Raises ``sandbox.ray_cluster.RayUnavailable`` (a ``ConnectionError``)
    with a one-line reason when the cluster cannot be reached or no actor starts."""

    def __init__(self, env: TaskEnv, address: str | None = None):
        spec = env.spec
        if spec is None:
            raise ValueError("RayScorer needs an env made with gym.make (its id and kwargs are "
                             "how the nodes build their copy)")
        self.env = env
        self.address = address
        connect(address)
        args = (spec.id, dict(spec.kwargs))
        self._actors = NodeActors(GradingActor, lambda node: (args, node_capacity(node)))
        try:
            self._actors.start()
        except Exception:
            self._actors.close()
            raise

    def nodes(self) -> list[dict[str, Any]]:
        return [dict(m.info) for m in self._actors.members()]

    @property
    def lost(self) -> int:
        """Actors lost mid-batch so far (their chunks were graded again elsewhere)."""
        return self._actors.lost_count

    @property
    def capacity(self) -> int:
        return sum(m.capacity for m in self._actors.members())

    def score_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[Result]:
        """``env.score(tasks[i], completions[i])`` for every i, graded on the cluster (a
        ``envs.grading`` backend: ``grade_batch(env, tasks, completions, backend=scorer)``)."""
        check_batch(tasks, completions)
        ids = [t if isinstance(t, str) else t.id for t in tasks]
        results: list[Result | None] = [None] * len(ids)
        size = max(1, math.ceil(len(ids) / max(1, CHUNKS_PER_SLOT * self.capacity)))
        todo = [(list(range(i, min(i + size, len(ids)))), 0) for i in range(0, len(ids), size)]
        running: dict[Any, tuple[Member, list[int], int]] = {}
        while todo or running:
            while todo:  # feed free slots
                member = self._actors.acquire(within_capacity=True)
                if member is None:
                    break
                rows, tries = todo.pop()
                ref = member.actor.score.remote([ids[i] for i in rows],
                                                [completions[i] for i in rows])
                running[ref] = (member, rows, tries)
            if not running:  # work left and no actor to take it
                for rows, _ in todo:
                    self._fill_lost(results, tasks, rows, "no grading actor is alive on the "
                                    "Ray cluster")
                break
            try:
                done = wait_any(list(running))
            except HeadLost as exc:  # nothing running will answer: all of it is unscored
                self._actors.drop_all(str(exc))
                for member, rows, _ in running.values():
                    self._actors.release(member)
                    self._fill_lost(results, tasks, rows, str(exc))
                for rows, _ in todo:
                    self._fill_lost(results, tasks, rows, str(exc))
                break
            member, rows, tries = running.pop(done[0])
            self._actors.release(member)
            try:
                graded = ray.get(done[0])
            except RayTaskError as exc:  # the actor broke outside grading: grade_batch says so
                raise exc.cause from None
            except LOST as exc:
                self._actors.lost(member)
                if tries < RETRIES:
                    todo.append((rows, tries + 1))
                else:
                    self._fill_lost(results, tasks, rows, f"lost the grading actor on node "
                                    f"{member.node_id[:8]}: {' '.join(str(exc).split())[:200]}")
                continue
            for i, pair in zip(rows, graded, strict=True):
                results[i] = pair
        return results  # type: ignore[return-value]

    def _fill_lost(self, results: list, tasks: Sequence[Task | str], rows: list[int],
                   error: str) -> None:
        for i in rows:
            results[i] = (0.0, infra_failure_info(self.env, tasks[i], error))

    def unreachable(self) -> str | None:
        """Why the cluster cannot grade at all now, in one line: its head does not answer, or
        no grading actor is left alive; ``None`` otherwise (one lost actor is replaced)."""
        where = self.address or "the local Ray instance"
        try:
            if self.address is not None:  # a TCP probe first: Ray's own calls wait minutes
                probe(check_address(self.address))
            self._actors.refresh(force=True)
            alive = self._actors.members()
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds here
            return (f"cannot reach the Ray cluster at {where} ({' '.join(str(exc).split())}): "
                    "start its head again (ray start --head), then resume")
        if not alive:
            return (f"no grading actor is alive on the Ray cluster at {where}: start its "
                    "nodes again (ray start --address ... --resources '{\"docker\": 1}')")
        return None

    def close(self) -> None:
        """End the actors, with the sandbox containers they hold. Never raises."""
        self._actors.close()

