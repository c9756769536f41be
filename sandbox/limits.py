"""What a run may use (``Limits``) and what it did (``RunResult``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "runtime_error", "timeout", "memory_limit", "output_limit",
                 "dirty_container", "sandbox_error"]
#: Verdicts on the program: whatever a job does to its own container, files, processes or
#: descriptors ends in one of these. ``dirty_container``: the program failed by leaving behind
#: state the agent could not clean up or check (more entries than it removes in its budget,
#: files it cannot remove, an agent that broke while the job ran); the container is replaced.
PROGRAM_STATUSES = ("ok", "runtime_error", "timeout", "memory_limit", "output_limit",
                    "dirty_container")
#: Failures independent of the program; only these are ``RunResult.infra_error``, and a learner
#: drops them. They come from: the runner (the sandbox closed, used from a forked process, no
#: container could start: the engine or pool; a job that could not start on three containers),
#: the worker (the channel to the agent lost or silent past the wall limit plus its grace, a
#: reply that is not a verdict) and the agent only before the job's code ran (its inputs could
#: not be written, the zygote could not start it: both retried elsewhere first).
INFRA_STATUSES = ("sandbox_error",)


@dataclass(frozen=True)
class Limits:
    """Per-run limits. ``memory_mb``, ``pids``, ``disk_mb`` and ``cpus`` are container limits:
    each set of them in use gets its own warm pool of containers (``Sandbox`` keeps several,
    bounded in total), so they are enforced by the engine, never weakened. The scratch space
    (``disk_mb``) and ``/dev/shm`` are memory that outlives a job's processes: together they
    leave 32 MB of ``memory_mb`` to the agent, so with a small ``memory_mb`` the scratch space
    is smaller than ``disk_mb`` (``sandbox.worker.writable_mb``)."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    pids: int = 64
    output_bytes: int = 1 << 20  # per stream (stdout, stderr)
    disk_mb: int = 64
    cpus: float = 1.0

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "pids", "output_bytes", "disk_mb", "cpus"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")
        if self.pids < 8:
            raise ValueError("Limits.pids must be at least 8 (the agent and the job need some)")

    def container_key(self) -> tuple[int, int, int, float]:
        """The limits fixed when a container is created."""
        return (self.memory_mb, self.pids, self.disk_mb, self.cpus)


@dataclass(frozen=True)
class RunResult:
    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    wall_s: float
    cpu_s: float = 0.0
    error: str = ""  # what went wrong: why a sandbox_error, or what made a dirty_container

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def infra(self) -> bool:
        """The infrastructure failed, not the program (``INFRA_STATUSES``)."""
        return self.status in INFRA_STATUSES

    @classmethod
    def infra_error(cls, message: str, wall_s: float = 0.0) -> RunResult:
        return cls("sandbox_error", None, "", "", False, wall_s, 0.0, message)
