"""Kill-able worker processes for the sympy part of math verification.

Why processes: sympy can hang or allocate without bound on hostile input
(``9^{9^{9^9}}``, ``100000!``), and ``signal.alarm`` only works in the main thread and
cannot stop C code. Each worker runs one check at a time under an address-space cap
(``RLIMIT_AS``); the caller waits on a pipe with a timeout and kills the worker if it
is late, then a fresh one replaces it.

How workers start: the project's one mechanism, ``envs.verify.worker_process`` (a fresh
interpreter, ``sys.executable -m envs.verify.math_worker``, never ``multiprocessing``'s
spawn, which re-runs the caller's ``__main__``). This module is import-light (stdlib only);
sympy is imported by the workers, never by the caller.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from envs.verify.worker_process import WorkerProcess, worker_connections

DEFAULT_MEMORY_BYTES = 2 * 1024**3
STARTUP_TIMEOUT = 120.0


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


_WARMUP = (
    ("1", "1"),
    (r"\sin(x)+\cos^2(y)", r"\tan^2(y)+1"),
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\left[\begin{array}{cc}1&2\\3&4\end{array}\right]"),
    (r"\sum_{k=0}^{n-1} f_k", r"f(x)"),
    (r"\frac{\pi}{e}+\mathrm{e}", r"\sqrt[3]{x}^2"),
    (r"\log_2 8+\ln(x)", r"|x| + 2^{10}i"),
    (r"x \leq 2", r"(-\infty, 2]"),
)


def _serve(conn_in: Connection, conn_out: Connection, memory_bytes: int) -> None:
    """Worker main loop: receive (gold, preds, decimal_rounding), send (passed, reason, details)."""
    import signal

    # Ctrl-C is the caller's business; a worker exits when its stdin closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from envs.verify.math_equiv import check

    try:
        import resource

        # Cap after the imports, never below what is already mapped.
        cap = max(memory_bytes, _vm_bytes() + 512 * 1024**2)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    # ANTLR builds its parsing DFA lazily: the first parse of each construct costs
    # 0.1-0.4 s. Pay that once per worker at start-up, not inside a timed check.
    for gold, pred in _WARMUP:
        check((gold,), ((pred,),))
    conn_out.send(("ready", os.getpid()))
    while True:
        try:
            task = conn_in.recv()
        except (EOFError, OSError):
            return  # the caller went away
        if task is None:
            return
        gold, preds, rounding = task
        try:
            result = check(gold, preds, rounding)
        except MemoryError:
            result = (False, "unparseable", {"error": "memory limit"})
        except RecursionError:
            result = (False, "unparseable", {"error": "recursion limit"})
        except Exception as exc:  # any sympy failure is a failed check, not a crash
            result = (False, "unparseable", {"error": repr(exc)[:200]})
        try:
            conn_out.send(result)
        except (OSError, ValueError):
            return


class _Worker(WorkerProcess):
    def __init__(self, memory_bytes: int) -> None:
        try:
            super().__init__("envs.verify.math_worker", (str(memory_bytes),), STARTUP_TIMEOUT)
        except RuntimeError:
            raise RuntimeError("math worker failed to start") from None


TIMEOUT: tuple[bool, str, dict[str, Any]] = (False, "timeout", {})


class WorkerPool:
    """Up to ``size`` workers, started lazily; safe to use from any number of threads."""

    def __init__(self, size: int | None = None, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        self.size = size or max(1, min(4, os.cpu_count() or 1))
        self.memory_bytes = memory_bytes
        self._idle: list[_Worker] = []
        self._live = 0
        self._cond = threading.Condition()
        self._closed = False
        self.restarts = 0
        self.owner_pid = os.getpid()

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("math worker pool is shut down")
                if self._idle:
                    return self._idle.pop()
                if self._live < self.size:
                    self._live += 1
                    break
                self._cond.wait()
        try:
            return _Worker(self.memory_bytes)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _release(self, w: _Worker) -> None:
        with self._cond:
            if self._closed:
                w.kill()
                self._live -= 1
            else:
                self._idle.append(w)
            self._cond.notify()

    def _discard(self, w: _Worker) -> None:
        w.kill()
        with self._cond:
            self._live -= 1
            self.restarts += 1
            self._cond.notify()

    def run(
        self, gold: tuple[str, ...], preds: tuple[tuple[str, ...], ...], timeout: float,
        decimal_rounding: bool = False,
    ) -> tuple[bool, str, dict[str, Any]]:
        """Check in a worker; a worker that overruns ``timeout`` seconds is killed."""
        w = self._acquire()
        start = time.monotonic()
        try:
            w.tx.send((gold, preds, decimal_rounding))
            if w.rx.poll(max(0.0, timeout)):
                result = w.rx.recv()
                self._release(w)
                return result
        except (EOFError, OSError, BrokenPipeError):
            self._discard(w)
            return (False, "unparseable", {"error": "worker died"})
        self._discard(w)
        return (False, "timeout", {"elapsed": round(time.monotonic() - start, 3)})

    def worker_pids(self) -> list[int]:
        with self._cond:
            return [w.pid for w in self._idle]

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for w in idle:
            with contextlib.suppress(OSError, ValueError):
                w.tx.send(None)
            w.kill()


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> WorkerPool:
    global _pool
    with _pool_lock:
        # After os.fork() the child must not share the parent's worker pipes.
        if _pool is None or _pool.owner_pid != os.getpid():
            size = int(os.environ.get("GRPO_GYM_MATH_WORKERS", "0")) or None
            _pool = WorkerPool(size)
            atexit.register(_pool.shutdown)
        return _pool


def reset_pool() -> None:
    """Shut the pool down; the next check starts a fresh one (tests, after fork)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()


def _main() -> None:
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_MEMORY_BYTES
    _serve(*worker_connections(), memory)


if __name__ == "__main__":
    _main()
