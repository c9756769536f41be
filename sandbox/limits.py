"""What a run may use (``Limits``) and what it did (``RunResult``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "runtime_error", "timeout", "memory_limit", "output_limit", "sandbox_error"]
#: Statuses caused by the program itself; ``sandbox_error`` alone means the infrastructure failed.
PROGRAM_STATUSES = ("ok", "runtime_error", "timeout", "memory_limit", "output_limit")


@dataclass(frozen=True)
class Limits:
    """Per-run limits. ``memory_mb``, ``pids``, ``disk_mb`` and ``cpus`` are container limits:
    each set of them in use gets its own warm pool of containers (``Sandbox`` keeps several,
    bounded in total), so they are enforced by the engine, never weakened."""

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
    error: str = ""  # what went wrong when status == "sandbox_error"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def infra_error(cls, message: str, wall_s: float = 0.0) -> RunResult:
        return cls("sandbox_error", None, "", "", False, wall_s, 0.0, message)
