"""``LocalSandbox``, what ``Sandbox()`` builds: untrusted Python programs in isolated, pooled
Docker containers on this machine's engine."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import threading
import time
import weakref
from typing import Any

import docker

from sandbox.base import Sandbox, SandboxUnavailable
from sandbox.image import ImageError, Progress, ensure_image
from sandbox.limits import Limits, RunResult
from sandbox.pool import Pool
from sandbox.worker import (
    INSTANCE_LABEL,
    OWNER_LABEL,
    JobInput,
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


#: How a user brings a local engine back (said wherever an engine that does not answer stops
#: something).
START_ENGINE_HINT = "start it with scripts/ensure-docker.sh (python -m sandbox doctor says what is missing)"


def engine_outage(host: str | None = None) -> str | None:
    """Why the Docker engine at ``host`` (``None``: ``DOCKER_HOST``; ``""``: the default socket)
    does not answer a ping, in one line naming it and how to start it; ``None`` when it does.
    Cheap: one short-timeout request, no pool, no image."""
    host = host if host is not None else os.environ.get("DOCKER_HOST", "")
    where = host or "the default socket"
    try:
        client = (docker.DockerClient(base_url=host, timeout=PING_TIMEOUT_S) if host
                  else docker.from_env(timeout=PING_TIMEOUT_S, environment={}))
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds here
        return f"cannot reach the Docker engine at {where} ({_one_line(exc)}): {START_ENGINE_HINT}"
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"cannot reach the Docker engine at {where} ({_one_line(exc)}): {START_ENGINE_HINT}"
    finally:
        client.close()
    return None


def _one_line(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


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


class LocalSandbox(Sandbox):
    """Warm pools of sandbox containers on this machine's Docker engine (see ``Sandbox`` for
    the keywords)."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        pool_size: int | None = None,
        image: str | None = None,
        progress: Progress | None = None,
        max_containers: int | None = None,
        idle_s: float = 60.0,
        backend: str = "local",
        ray_address: str | None = None,
    ):
        if backend != "local":
            raise ValueError(f"LocalSandbox is the 'local' backend: use Sandbox(backend={backend!r})")
        if ray_address is not None:
            raise ValueError("Sandbox(ray_address=...) needs backend='ray'")
        self.limits = limits or Limits()
        self._pool_size = pool_size or os.cpu_count() or 1
        self.max_containers = max_containers or 4 * self.pool_size
        # The engine this sandbox talks to, for ``unreachable`` (DOCKER_HOST may change later).
        self._host = os.environ.get("DOCKER_HOST") or ""
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
        self._pid = os.getpid()
        _sweep_unswept(self.client)
        self._pool = Pool(self._new_worker, self.pool_size, self.max_containers, self.limits,
                          idle_s, remove=lambda cid: remove_container(self.client, cid),
                          on_recovery=lambda: _sweep_unswept(self.client))
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
        """Run the Python program ``code`` in a pristine sandbox (see ``RunResult.status``).

        Raises ``ValueError`` for a bad file name, or when ``code`` and ``files`` cannot fit in
        the scratch space (``Limits.disk_mb``). Stdin of any size is streamed to the program.
        """
        limits = limits or self.limits
        job = JobInput.of(code, stdin, files, limits)
        start = time.monotonic()
        if self._closed:
            return RunResult.infra_error("the sandbox is closed")
        if os.getpid() != self._pid:
            # A forked child shares the parent's engine connections: its requests and replies
            # would interleave with the parent's (garbled jobs). It must start its own Sandbox.
            return RunResult.infra_error(
                f"this Sandbox was created in process {self._pid}; a forked process "
                "(multiprocessing, AsyncVectorEnv) must create its own")
        error = ""
        for _ in range(START_ATTEMPTS):
            try:
                worker = self._pool.acquire(limits)
            except WorkerError as exc:
                return RunResult.infra_error(str(exc), time.monotonic() - start)
            reusable = False
            try:
                result, reusable = worker.run(job, limits)
            except JobNotStarted as exc:  # no job code ran: retry on another container
                error = str(exc)
                continue
            finally:
                self._pool.release(worker, reusable)
            return result
        return RunResult.infra_error(error, time.monotonic() - start)

    def warm(self, timeout: float | None = None) -> int:
        """Block until the pool's containers have started; return how many are ready."""
        return self._pool.warm(timeout)

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Remove every container this sandbox started (idempotent; never raises, also when
        the engine is down: an engine that restarts removes them itself, as auto-remove)."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._pid:
            # A forked copy: the containers are the parent's, still in use, and its engine
            # connections are the parent's too. Closing it only stops this copy.
            return
        with contextlib.suppress(Exception):
            self._pool.close()
        try:  # anything the pool lost track of, e.g. a start cut short
            _sweep(self.client, self.instance, again_s=SWEEP_AGAIN_S)
        except Exception:  # noqa: BLE001 - the engine is unreachable: another sandbox of this
            _unswept.add(self.instance)  # process sweeps once it reaches the engine again
        else:
            # The engine answers: also what sandboxes closed during an outage left, which an
            # engine restarted since may have restored after their recovery sweep ran.
            _sweep_unswept(self.client)

    def unreachable(self) -> str | None:
        """Why this sandbox's engine does not answer (``engine_outage``); None when it does."""
        return engine_outage(self._host)

    def pool_state(self) -> list[dict[str, Any]]:
        """One entry per set of container limits in use: the limits, and how many containers
        are ready, busy and starting (``python -m sandbox doctor`` shows the same per engine)."""
        return self._pool.state()

    def containers(self) -> list[str]:
        """Ids of the containers this sandbox owns right now (for diagnostics and tests)."""
        return [c["Id"] for c in self.client.api.containers(
            all=True, filters={"label": f"{INSTANCE_LABEL}={self.instance}"})]


# -- containers of closed sandboxes that an outage kept us from removing ----------------------
_unswept: set[str] = set()  # instance ids


#: How long a closing sandbox keeps removing its containers while any is left: after an engine
#: restart a removal reported in progress (409) can still fail, and a start cut short by
#: ``close`` can land after the first listing.
SWEEP_AGAIN_S = 10.0


def _sweep(client: docker.DockerClient, instance: str, again_s: float = 0.0) -> None:
    """Remove the containers of ``instance``; for ``again_s`` seconds, list and remove again
    while any is left (raising the last removal's error if some are still there then)."""
    end = time.monotonic() + again_s
    while True:
        left = client.api.containers(all=True,
                                     filters={"label": f"{INSTANCE_LABEL}={instance}"})
        if not left:
            return
        error: Exception | None = None
        for c in left:
            try:
                remove_container(client, c["Id"])
            except docker.errors.APIError as exc:  # the next round tries it again
                error = exc
        if time.monotonic() >= end:
            if error is not None:
                raise error
            return
        time.sleep(0.5)


def _sweep_unswept(client: docker.DockerClient) -> None:
    """Remove the containers of sandboxes closed while the engine was unreachable (an engine
    restarted under them may have restored them, still running)."""
    for instance in list(_unswept):
        with contextlib.suppress(Exception):
            _sweep(client, instance)


# -- cleanup at exit, on SIGTERM/SIGHUP ------------------------------------------------------
_live: weakref.WeakSet[LocalSandbox] = weakref.WeakSet()
_cleanup_lock = threading.Lock()
_handlers_installed = False


def _close_all() -> None:
    for sb in list(_live):
        with contextlib.suppress(Exception):  # best effort at exit
            sb.close()


def _forget_after_fork() -> None:
    """A forked child owns none of the parent's sandboxes: its exit must not close them, nor
    sweep what the parent left for itself to sweep."""
    global _live, _cleanup_lock
    _live, _cleanup_lock = weakref.WeakSet(), threading.Lock()
    _unswept.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _on_signal(signum: int, frame: object) -> None:
    # Turn the signal into a normal exit so atexit (and context managers) run.
    raise SystemExit(128 + signum)


def _register_cleanup(sb: LocalSandbox) -> None:
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
