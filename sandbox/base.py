"""``Sandbox``: the API every sandbox backend shares, and the backends by name.

``Sandbox(...)`` builds the backend that its ``backend`` keyword names: ``"local"``, warm
Docker pools on this machine (``sandbox.runner.LocalSandbox``), or ``"ray"``, one such pool per
node of a Ray cluster (``sandbox.ray_backend.RaySandbox``). Both are ``Sandbox`` subclasses.
The backends are named here by module path, not imported: each backend module imports this
one, so no import circle forms, and Docker's or Ray's client loads only when its backend is
built.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from sandbox.limits import Limits, RunResult

#: Backend name -> "module:class". A new backend is a subclass of ``Sandbox`` named here.
BACKENDS = {"local": "sandbox.runner:LocalSandbox", "ray": "sandbox.ray_backend:RaySandbox"}


class SandboxUnavailable(RuntimeError):
    """No usable Docker engine, image or cluster; the message says how to fix it."""


def backend_class(name: str) -> type[Sandbox]:
    """The class of backend ``name``, imported on first use (a ``ValueError`` for an unknown
    name)."""
    if name not in BACKENDS:
        raise ValueError(f"Sandbox(backend={name!r}): use "
                         + " or ".join(repr(n) for n in BACKENDS))
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


class Sandbox:
    """Runs untrusted Python programs in isolation. ``run`` is thread-safe; ``arun`` is its
    async twin.

    ``Sandbox(limits=None, pool_size=None, image=None, progress=None, max_containers=None,
    idle_s=60.0, backend="local", ray_address=None)``: ``limits`` are the defaults for every run.
    Each set of container limits in use (memory, pids, disk, CPU quota) gets ``pool_size`` warm
    containers (default: the CPU count), at most ``max_containers`` in all (default: 4 pools'
    worth); a set unused for ``idle_s`` seconds is closed, except the default one. The image is
    built on first use.

    ``backend="ray"`` runs the jobs on a Ray cluster instead, each node's actor holding such a
    pool on its own engine (``sandbox.ray_backend``); ``ray_address`` is the cluster (``None``
    starts a local Ray instance, ``"auto"``, ``HOST:PORT`` or ``ray://HOST:PORT`` joins one).
    """

    limits: Limits

    @property
    def pool_size(self) -> int:
        """The jobs it runs at once (the Ray backend sums its nodes' pools)."""
        return self._pool_size

    _pool_size: int

    def __new__(cls, *args: Any, backend: str = "local", **kwargs: Any) -> Sandbox:
        impl = backend_class(backend)  # checks the name whichever class is called
        # ``Sandbox(...)`` picks the backend; a backend class called directly is itself.
        return super().__new__(impl if cls is Sandbox else cls)

    def run(self, code: str, *, stdin: str | bytes = "",
            files: dict[str, str | bytes] | None = None,
            limits: Limits | None = None) -> RunResult:
        """Run the Python program ``code`` in a pristine sandbox (see ``RunResult.status``)."""
        raise NotImplementedError

    async def arun(self, code: str, *, stdin: str | bytes = "",
                   files: dict[str, str | bytes] | None = None,
                   limits: Limits | None = None) -> RunResult:
        # ``run`` waits on a container or a cluster, not the CPU: a thread serves it.
        return await asyncio.to_thread(self.run, code, stdin=stdin, files=files, limits=limits)

    def warm(self, timeout: float | None = None) -> int:
        """Block until the warm containers have started; return how many are ready."""
        raise NotImplementedError

    def containers(self) -> list[str]:
        """Ids of the containers this sandbox owns right now (for diagnostics and tests)."""
        raise NotImplementedError

    def unreachable(self) -> str | None:
        """Why the backend as a whole cannot run jobs now (its engine or cluster does not
        answer), in one line; ``None`` when it answers. A single lost container is not an
        outage: its job is an ``infra_error`` and the next one runs elsewhere."""
        return None

    def close(self) -> None:
        """Remove every container this sandbox started (idempotent; never raises)."""
        raise NotImplementedError

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
