"""A fixed number of warm workers; dirty or broken ones are replaced in the background.

The pool has ``size`` slots. Each slot is, at any time, a ready worker in the idle queue, a
worker running a job, a replacement being started, or a ``_Broken`` marker (its last start
failed). So ``acquire`` never waits forever: it gets a worker, or a marker it turns into one more
start attempt whose failure it reports.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from sandbox.worker import Worker, WorkerError


class _Broken:
    def __init__(self, error: Exception):
        self.error = error


class Pool:
    def __init__(self, factory: Callable[[], Worker], size: int):
        self._factory = factory
        self.size = size
        self._idle: queue.Queue[Worker | _Broken] = queue.Queue()
        self._lock = threading.Lock()
        self._live: set[Worker] = set()
        self._closed = False
        self._threads: list[threading.Thread] = []
        for _ in range(size):
            self._refill()

    def _refill(self) -> None:
        t = threading.Thread(target=self._start_one, name="sandbox-pool-start", daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _start_one(self) -> None:
        try:
            worker = self._factory()
        except Exception as exc:  # noqa: BLE001 - reported by the next acquire
            self._idle.put(_Broken(exc))
            return
        with self._lock:
            if not self._closed:
                self._live.add(worker)
                self._idle.put(worker)
                return
        worker.close()

    def acquire(self) -> Worker:
        """A ready worker; raises ``WorkerError`` when none can be started."""
        item = self._idle.get()
        if isinstance(item, Worker):
            return item
        try:
            worker = self._factory()
        except Exception as exc:
            self._idle.put(_Broken(exc))  # the slot stays, for the next caller to retry
            raise WorkerError(str(exc)) from exc
        with self._lock:
            self._live.add(worker)
            if self._closed:
                self._live.discard(worker)
                worker.close()
                raise WorkerError("the sandbox is closed")
        return worker

    def release(self, worker: Worker, reusable: bool) -> None:
        """Give a worker back after a job; a worker that may be changed is replaced."""
        if reusable and not self._closed:
            self._idle.put(worker)
            return
        with self._lock:
            self._live.discard(worker)
        threading.Thread(target=worker.close, name="sandbox-pool-close", daemon=True).start()
        if not self._closed:
            self._refill()

    def warm(self, timeout: float | None = None) -> int:
        """Wait until the initial starts have finished; return how many workers are ready."""
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)
        return self._idle.qsize()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
            starting = list(self._threads)
        closers = [threading.Thread(target=w.close, daemon=True) for w in workers]
        for t in closers:
            t.start()
        for t in closers + starting:
            t.join(30)
