"""``Sandbox``: run untrusted Python programs in isolated, pooled Docker containers."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import secrets
import signal
import threading
import time
import weakref

import docker

from sandbox.image import ImageError, Progress, ensure_image
from sandbox.limits import Limits, RunResult
from sandbox.pool import Pool
from sandbox.worker import (
    INSTANCE_LABEL,
    OWNER_LABEL,
    JobNotStarted,
    Worker,
    WorkerError,
    owner_tag,
    remove_container,
    remove_stale,
)

PING_TIMEOUT_S = 10
API_TIMEOUT_S = 300
START_ATTEMPTS = 3  # containers tried for a job that could not start (see JobNotStarted)


class SandboxUnavailable(RuntimeError):
    """No usable Docker engine or image; the message says how to fix it."""


def connect() -> docker.DockerClient:
    """A client for the engine named by ``DOCKER_HOST`` (or the default socket), checked alive."""
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    try:
        # A short timeout to find out whether anything answers; a long one for real work
        # (image import, container starts on a busy engine).
        docker.from_env(timeout=PING_TIMEOUT_S).ping()
        client = docker.from_env(timeout=API_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds here
        raise SandboxUnavailable(
            f"cannot reach a Docker engine at {where}: {exc}. "
            "Run `python -m sandbox doctor` for what is missing and how to fix it."
        ) from exc
    return client


class Sandbox:
    """A warm pool of sandbox containers. ``run`` is thread-safe; ``arun`` is its async twin.

    ``limits`` are the defaults for every run and fix the pool containers' memory, pids, disk
    and CPU quota. ``pool_size`` defaults to the CPU count. The image is built on first use.

    ``backend="ray"`` runs the jobs on a Ray cluster instead, each node's actor holding such a
    pool on its own engine (``sandbox.ray_backend``); ``ray_address`` is the cluster (``None``
    starts a local Ray instance, ``"auto"``, ``HOST:PORT`` or ``ray://HOST:PORT`` joins one).
    """

    def __new__(cls, *args: object, backend: str = "local", **kwargs: object) -> Sandbox:
        if backend not in ("local", "ray"):
            raise ValueError(f"Sandbox(backend={backend!r}): use 'local' or 'ray'")
        if backend == "ray" and cls is Sandbox:
            from sandbox.ray_backend import RaySandbox  # imports Ray only when asked for

            return super().__new__(RaySandbox)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        pool_size: int | None = None,
        image: str | None = None,
        progress: Progress | None = None,
        backend: str = "local",
        ray_address: str | None = None,
    ):
        if ray_address is not None and backend != "ray":
            raise ValueError("Sandbox(ray_address=...) needs backend='ray'")
        self.limits = limits or Limits()
        self.pool_size = pool_size or os.cpu_count() or 1
        self.client = connect()
        try:
            self.image = ensure_image(self.client, image, progress)
        except (ImageError, docker.errors.DockerException) as exc:
            raise SandboxUnavailable(f"no sandbox image: {exc}") from exc
        self.owner = owner_tag()
        self.instance = secrets.token_hex(8)
        self._labels = {OWNER_LABEL: self.owner, INSTANCE_LABEL: self.instance}
        remove_stale(self.client)
        self._closed = False
        self._pool = Pool(self._new_worker, self.pool_size)
        _register_cleanup(self)

    # -- running ------------------------------------------------------------------------------
    def _new_worker(self, limits: Limits | None = None) -> Worker:
        return Worker(self.client, self.image, limits or self.limits, self._labels)

    def run(
        self,
        code: str,
        *,
        stdin: str | bytes = "",
        files: dict[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        """Run the Python program ``code`` in a pristine sandbox (see ``RunResult.status``)."""
        limits = limits or self.limits
        _check_files(files)
        start = time.monotonic()
        if self._closed:
            return RunResult.infra_error("the sandbox is closed")
        if limits.container_key() != self.limits.container_key():
            return self._run_one_off(code, stdin, files, limits)
        error = ""
        for _ in range(START_ATTEMPTS):
            try:
                worker = self._pool.acquire()
            except WorkerError as exc:
                return RunResult.infra_error(str(exc), time.monotonic() - start)
            reusable = False
            try:
                result, reusable = worker.run(code, stdin, files, limits)
            except JobNotStarted as exc:  # no job code ran: retry on another container
                error = str(exc)
                continue
            finally:
                self._pool.release(worker, reusable)
            return result
        return RunResult.infra_error(error, time.monotonic() - start)

    def _run_one_off(self, code, stdin, files, limits: Limits) -> RunResult:
        try:
            worker = self._new_worker(limits)
        except WorkerError as exc:
            return RunResult.infra_error(str(exc))
        try:
            return worker.run(code, stdin, files, limits)[0]
        except JobNotStarted as exc:
            return RunResult.infra_error(str(exc))
        finally:
            worker.close()

    async def arun(
        self,
        code: str,
        *,
        stdin: str | bytes = "",
        files: dict[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        return await asyncio.to_thread(self.run, code, stdin=stdin, files=files, limits=limits)

    def warm(self, timeout: float | None = None) -> int:
        """Block until the pool's containers have started; return how many are ready."""
        return self._pool.warm(timeout)

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Remove every container this sandbox started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        try:  # anything the pool lost track of, e.g. a start cut short
            for c in self.client.api.containers(
                all=True, filters={"label": f"{INSTANCE_LABEL}={self.instance}"}
            ):
                remove_container(self.client, c["Id"])
        except docker.errors.DockerException:
            pass

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def containers(self) -> list[str]:
        """Ids of the containers this sandbox owns right now (for diagnostics and tests)."""
        return [c["Id"] for c in self.client.api.containers(
            all=True, filters={"label": f"{INSTANCE_LABEL}={self.instance}"})]


def _check_files(files: dict[str, str | bytes] | None) -> None:
    for name in files or {}:
        parts = name.split("/")
        if not name or name.startswith("/") or ".." in parts or name == "main.py":
            raise ValueError(f"bad file name {name!r}: use a relative path inside the scratch "
                             "directory (main.py is the program itself)")


# -- cleanup at exit, on SIGTERM/SIGHUP ------------------------------------------------------
_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_cleanup_lock = threading.Lock()
_handlers_installed = False


def _close_all() -> None:
    for sb in list(_live):
        with contextlib.suppress(Exception):  # best effort at exit
            sb.close()


def _on_signal(signum: int, frame: object) -> None:
    # Turn the signal into a normal exit so atexit (and context managers) run.
    raise SystemExit(128 + signum)


def _register_cleanup(sb: Sandbox) -> None:
    global _handlers_installed
    with _cleanup_lock:
        _live.add(sb)
        if _handlers_installed:
            return
        _handlers_installed = True
        atexit.register(_close_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    signal.signal(sig, _on_signal)
