"""Warm workers for every set of container limits in use, bounded in total.

Memory, pids, disk and CPU quota (``Limits.container_key``) are fixed when a container is
created, so each set of them in use gets its own warm workers: up to ``per_set`` of them, started
on first use and replaced in the background after a job that may have changed one. At most
``capacity`` containers exist at any time (ready, busy or starting); a set that needs room takes
it from the idle workers of the set used least recently (the sandbox's default set last), and a
set unused for ``idle_s`` is closed, except the default one.

When a start fails (typically: the engine is down) its set backs off: until the delay has passed,
``acquire`` fails at once with that error and nothing talks to the engine, so an outage costs
neither descriptors nor threads. The delay doubles up to ``MAX_BACKOFF_S`` (so a restarted engine
is used again within about a second) and a successful start resets it.

Threads: one per start in flight (at most ``capacity``), one per container being removed, and
one janitor.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.limits import Limits
from sandbox.worker import Worker, WorkerError

MIN_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

Key = tuple[int, int, int, float]


@dataclass
class _Set:
    """The workers of one set of container limits."""

    limits: Limits
    idle: list[Worker] = field(default_factory=list)
    busy: int = 0
    starting: int = 0
    last_used: float = field(default_factory=time.monotonic)
    error: str = ""  # the last failed start's error, while backing off
    retry_at: float = 0.0
    backoff: float = 0.0

    @property
    def size(self) -> int:
        return len(self.idle) + self.busy + self.starting


class Pool:
    def __init__(self, factory: Callable[[Limits], Worker], per_set: int, capacity: int,
                 default: Limits, idle_s: float = 60.0,
                 remove: Callable[[str], None] | None = None,
                 on_recovery: Callable[[], None] | None = None):
        if capacity < per_set:
            raise ValueError(f"the pool's capacity ({capacity}) must hold at least one full set "
                             f"of warm containers ({per_set})")
        self._factory = factory
        self._remove = remove
        self._on_recovery = on_recovery
        # Containers whose removal failed (engine down): removed once a start succeeds again,
        # or they could outlive the outage (an engine restored with them still running).
        self._orphans: set[str] = set()
        self.per_set = per_set
        self.capacity = capacity
        self.idle_s = idle_s
        self.default = default
        self._cond = threading.Condition()
        self._sets: dict[Key, _Set] = {}
        self._live: set[Worker] = set()
        self._starts: set[threading.Thread] = set()
        self._closed = False
        self._stop = threading.Event()
        with self._cond:
            self._fill(self._set(default))
        threading.Thread(target=self._janitor, name="sandbox-pool-janitor", daemon=True).start()

    # -- bookkeeping (callers hold self._cond) ------------------------------------------------
    def _set(self, limits: Limits) -> _Set:
        key = limits.container_key()
        s = self._sets.get(key)
        if s is None:
            s = self._sets[key] = _Set(limits)
        return s

    def _total(self) -> int:
        return sum(s.size for s in self._sets.values())

    def _evict_one(self, keep: _Set) -> bool:
        """Remove an idle worker of the least recently used other set; False when none is idle."""
        others = [s for s in self._sets.values() if s is not keep and s.idle]
        if not others:
            return False
        # The default set goes last: most runs use it.
        default = self.default.container_key()
        victim = min(others, key=lambda s: (s.limits.container_key() == default, s.last_used))
        self._discard(victim.idle.pop(0))
        return True

    def _fill(self, s: _Set) -> None:
        """Start workers for ``s`` in the background up to ``per_set``, within capacity."""
        while (not self._closed and s.size < self.per_set and time.monotonic() >= s.retry_at
               and (self._total() < self.capacity or self._evict_one(s))):
            s.starting += 1
            t = threading.Thread(target=self._start, args=(s,), name="sandbox-pool-start",
                                 daemon=True)
            self._starts.add(t)
            t.start()

    def _discard(self, worker: Worker) -> None:
        self._live.discard(worker)
        threading.Thread(target=self._close, args=(worker,), name="sandbox-pool-close",
                         daemon=True).start()

    def _close(self, worker: Worker) -> None:
        orphan = worker.close()
        if orphan is not None:
            with self._cond:
                self._orphans.add(orphan)

    def _start(self, s: _Set) -> None:
        worker: Worker | None = None
        error = ""
        try:
            worker = self._factory(s.limits)
        except Exception as exc:  # noqa: BLE001 - reported to the callers waiting for this set
            error = str(exc) or type(exc).__name__  # the text only: no traceback kept alive
        recovered = False
        with self._cond:
            s.starting -= 1
            self._starts.discard(threading.current_thread())
            if worker is None:
                s.backoff = min(max(2 * s.backoff, MIN_BACKOFF_S), MAX_BACKOFF_S)
                s.retry_at = time.monotonic() + s.backoff
                s.error = error
            elif self._closed:
                self._discard(worker)  # in the background: not under the lock
            else:
                recovered = s.backoff > 0 or bool(self._orphans)
                s.backoff, s.retry_at, s.error = 0.0, 0.0, ""
                self._live.add(worker)
                s.idle.append(worker)
            orphans: set[str] = set()
            if recovered:
                orphans, self._orphans = self._orphans, set()
            self._cond.notify_all()
        if recovered:
            self._recover(orphans)

    def _recover(self, orphans: set[str]) -> None:
        """The engine answers again: remove what the outage left behind."""
        for cid in orphans:
            try:
                if self._remove is not None:
                    self._remove(cid)
            except Exception:  # noqa: BLE001 - still unreachable: keep it for the next time
                with self._cond:
                    self._orphans.add(cid)
        if self._on_recovery is not None:
            with contextlib.suppress(Exception):
                self._on_recovery()

    # -- the API ------------------------------------------------------------------------------
    def acquire(self, limits: Limits | None = None) -> Worker:
        """A ready worker with ``limits``' container limits (default: the pool's); raises
        ``WorkerError`` at once while its set backs off after a failed start."""
        with self._cond:
            while True:
                s = self._set(limits or self.default)  # anew: the janitor may have dropped it
                s.last_used = time.monotonic()
                if self._closed:
                    raise WorkerError("the sandbox is closed")
                if s.idle:
                    s.busy += 1
                    return s.idle.pop()
                if s.last_used < s.retry_at:
                    raise WorkerError(s.error)
                self._fill(s)
                # Wait for a start of this set, or for room (every container busy elsewhere).
                self._cond.wait(1.0)

    def release(self, worker: Worker, reusable: bool) -> None:
        """Give a worker back after a job; one that may have been changed is replaced."""
        with self._cond:
            s = self._set(worker.limits)
            s.busy -= 1
            s.last_used = time.monotonic()
            if reusable and not self._closed:
                s.idle.append(worker)
            else:
                self._discard(worker)
                self._fill(s)
            self._cond.notify_all()

    def warm(self, timeout: float | None = None) -> int:
        """Wait until the default set's starts have finished; return how many are ready."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            s = self._set(self.default)
            while s.starting and not self._closed:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            return len(s.idle)

    def state(self) -> list[dict[str, Any]]:
        """One entry per set of container limits: its limits and its workers' states."""
        now = time.monotonic()
        with self._cond:
            return [{
                "memory_mb": s.limits.memory_mb, "pids": s.limits.pids,
                "disk_mb": s.limits.disk_mb, "cpus": s.limits.cpus,
                "ready": len(s.idle), "busy": s.busy, "starting": s.starting,
                "idle_s": round(now - s.last_used, 1),
                "default": key == self.default.container_key(),
                "error": s.error if now < s.retry_at else "",
            } for key, s in self._sets.items()]

    def _janitor(self) -> None:
        """Close the sets nobody used for ``idle_s`` (never the default one)."""
        default = self.default.container_key()
        while not self._stop.wait(max(self.idle_s / 4, 0.05)):
            with self._cond:
                now = time.monotonic()
                for key, s in list(self._sets.items()):
                    if key == default or now - s.last_used < self.idle_s:
                        continue
                    while s.idle:
                        self._discard(s.idle.pop())
                    if s.size == 0:
                        del self._sets[key]

    def close(self) -> None:
        """Remove every worker (busy ones too: their jobs end as ``sandbox_error``)."""
        with self._cond:
            self._closed = True
            self._stop.set()
            workers = list(self._live)
            self._live.clear()
            for s in self._sets.values():
                s.idle.clear()
            starting = list(self._starts)
            self._cond.notify_all()
        closers = [threading.Thread(target=self._close, args=(w,), daemon=True)
                   for w in workers]
        for t in closers:
            t.start()
        # One 30 s bound for them all, not 30 s each: a process exiting on a signal must not
        # wait minutes on a slow engine (what is left, the engine's auto-remove or the next
        # sandbox's sweep removes).
        deadline = time.monotonic() + 30
        for t in closers + starting:
            t.join(max(0.0, deadline - time.monotonic()))

