"""The reasoning-gym scorer worker: a fork server that scores each answer in a fresh child.

The worker (``python -m envs.domains.reasoning_gym.scorer_worker``, started by the project's one worker
mechanism, ``envs.verify.worker_process``) imports reasoning-gym and builds each task's dataset
once; it never runs an answer itself. For each answer it forks a child which closes the worker's
pipes to the env process, confines itself (``sandbox.host_confine``: no process, socket or file
change, a memory cap) and only then calls the scorer; the child writes its score as JSON (never
a pickle: the worker must not unpickle what model text may have written) and is killed before
the worker replies (and reaped: before it, or just after it for a pre-forked child). So an answer
that escapes its scorer can touch its own episode at most: the child that ran it is never used again, and cannot reach the pipe that
carries other episodes' verdicts.

Requests and replies carry ids: a reply that is late, missing or for another request stops the
worker and is an infrastructure error (``infra_error``), never a verdict.

The fork is off the critical path (``prefork``, the default): the worker keeps one *spare* child,
forked and confined before any answer is known, that waits on a pipe of its own for one request.
An answer goes to the spare; while it scores, the worker forks the next spare, so the next answer
finds a clean child waiting; the used child is killed before the reply and reaped after it. A spare serves one answer only and is killed after it, as before; it
closes every descriptor but its own two pipes, so it holds nothing of the worker's or of another
child's; and it is forked after the datasets it may score are built (preparing a new one replaces
the spare), so a confined child never builds one. ``prefork=False`` forks per answer.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import itertools
import json
import math
import os
import signal
import threading
from collections.abc import Callable
from functools import lru_cache
from multiprocessing.connection import Connection
from typing import Any

from envs.verify.worker_process import WorkerProcess, worker_connections
from sandbox.host_confine import confine

MODULE = "envs.domains.reasoning_gym.scorer_worker"
#: Seconds a new worker may take to import reasoning-gym, and a dataset to be built.
READY_S = 120.0
#: A child's address space: an answer that asks for more (``"a" * 10**12``) fails there.
WORKER_MEMORY = 4 << 30
#: Seconds the worker may take beyond an answer's time limit to reply (fork, kill, reap).
REPLY_SLACK_S = 15.0
#: Bytes a child's reply may take.
REPLY_BYTES = 4096
#: The worker forks: its math libraries must not hold thread pools.
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")}

#: ``("rg", task, config key)``: the dataset's own ``score_answer``; ``("call",
#: "module:function")``: a function ``(answer, entry) -> float`` (tests use it).
ScorerSpec = tuple[str, ...]


def config_key(config: dict[str, Any]) -> str:
    return repr(sorted(config.items()))


def config_from_key(key: str) -> dict[str, Any]:
    import ast

    return dict(ast.literal_eval(key))


# -- inside the worker ----------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _scorer(spec: ScorerSpec) -> Callable[[str, dict[str, Any]], float]:
    if spec[0] == "call":
        module, _, name = spec[1].partition(":")
        return getattr(importlib.import_module(module), name)
    from envs.domains.reasoning_gym.generator import make_dataset

    _, task, config = spec
    return make_dataset(task, config_from_key(config), seed=0, size=1).score_answer


def _run_scorer(scorer: Callable[[str, Any], Any], answer: str, entry: Any) -> list[Any]:
    """A confined child's reply for one answer: ``["ok", score]`` or ``["scorer_error", why]``."""
    try:
        value = scorer(answer, entry)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return ["ok", float(value)]  # float() too may raise (an int past a float's range)
    except BaseException as exc:  # noqa: BLE001 - an upstream scorer may raise anything
        return ["scorer_error", f"{type(exc).__name__}: {exc}"[:300]]
    return ["scorer_error", f"the scorer returned {type(value).__name__}"]


def _child(scorer: Callable[..., Any], entry: dict[str, Any], answer: str, out: int,
           closing: tuple[int, ...], memory: int) -> None:  # pragma: no cover - a forked child
    """In the forked child: confine, score, write ``[outcome, value]`` as JSON; never returns."""
    try:
        for fd in closing:  # the worker's pipes to the env process: out of reach from here on
            os.close(fd)
        try:
            confine(memory_bytes=memory)
        except OSError as exc:
            reply: list[Any] = ["scorer_error", f"the scorer cannot be confined here ({exc}), so it "
                                     f"does not run"]
        else:
            reply = _run_scorer(scorer, answer, entry)
        Connection(out, readable=False).send_bytes(json.dumps(reply).encode())
    finally:
        os._exit(0)


def _fork_and_score(spec: ScorerSpec, entry: dict[str, Any], answer: str, timeout: float,
                    own: tuple[int, ...], memory: int) -> tuple[str, Any]:
    scorer = _scorer(spec)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        gc.disable()  # a collection would touch, and so copy, every page of the worker
        os.close(read)
        _child(scorer, entry, answer, write, own, memory)
    os.close(write)
    conn = Connection(read, writable=False)
    try:
        if not conn.poll(timeout):
            return "timeout", f"the scorer did not answer within {timeout:g} s"
        try:
            return _plain_reply(json.loads(conn.recv_bytes(REPLY_BYTES)))
        except (EOFError, OSError, ValueError) as exc:
            return "scorer_error", f"the scorer's process died or wrote no reply ({exc})"[:300]
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        conn.close()


def _spare_child(requests: int, reply: int, memory: int) -> None:  # pragma: no cover - a child
    """In a pre-forked child: keep only its own two pipes, confine, wait for one ``(spec, entry,
    answer)`` from the worker, score it (a spec prepared before the fork: its scorer is in the
    inherited cache), write ``[outcome, value]`` as JSON; never returns."""
    try:
        keep = sorted({0, 1, 2, requests, reply})
        for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
            os.closerange(low + 1, high)  # the worker's pipes, other children's, all but these
        try:
            confine(memory_bytes=memory)
            confined = None
        except OSError as exc:
            confined = f"the scorer cannot be confined here ({exc}), so it does not run"
        try:
            spec, entry, answer = Connection(requests, writable=False).recv()
        except (EOFError, OSError):
            return  # the worker let this spare go unused
        if confined is not None:
            out: list[Any] = ["scorer_error", confined]
        else:
            out = _run_scorer(_scorer(spec), answer, entry)
        Connection(reply, readable=False).send_bytes(json.dumps(out).encode())
    finally:
        os._exit(0)


class _Spare:
    """A child forked and confined ahead of its answer (in the worker). ``specs``: the scorers
    built when it was forked, the only ones it may be asked to run."""

    def __init__(self, specs: frozenset[ScorerSpec], memory: int) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            gc.disable()  # a collection would touch, and so copy, every page of the worker
            _spare_child(req_r, rep_w, memory)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.specs = pid, specs
        self.tx = Connection(req_w, readable=False)
        self.rx = Connection(rep_r, writable=False)

    def score_answer(self, spec: ScorerSpec, entry: dict[str, Any], answer: str, timeout: float,
              fork_next: Callable[[], None]) -> tuple[str, Any]:
        """Send the one answer, fork the next spare while it scores, wait for the reply, and
        kill the child (reaped later by ``close``: it runs nothing once killed, and the reply
        need not wait for it)."""
        try:
            self.tx.send((spec, entry, answer))
            fork_next()
            if not self.rx.poll(timeout):
                return "timeout", f"the scorer did not answer within {timeout:g} s"
            try:
                return _plain_reply(json.loads(self.rx.recv_bytes(REPLY_BYTES)))
            except (EOFError, OSError, ValueError) as exc:
                return "scorer_error", f"the scorer's process died or wrote no reply ({exc})"[:300]
        except (OSError, ValueError) as exc:  # the spare died before its request
            return "scorer_error", f"the scorer's process could not take the answer ({exc})"[:300]
        finally:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        for conn in (self.tx, self.rx):
            with contextlib.suppress(OSError):
                conn.close()


def _plain_reply(reply: Any) -> tuple[str, Any]:
    """A child's reply as ``(outcome, value)``; anything else is a scorer error."""
    if (isinstance(reply, list) and len(reply) == 2 and reply[0] == "ok"
            and type(reply[1]) in (int, float) and math.isfinite(reply[1])):
        return "ok", float(reply[1])
    if isinstance(reply, list) and len(reply) == 2 and reply[0] == "scorer_error":
        return "scorer_error", str(reply[1])[:300]
    return "scorer_error", f"the scorer's process wrote {str(reply)[:80]!r}"


def _serve(requests: Connection, replies: Connection, memory: int, prefork: bool = True) -> None:
    """The worker's loop: ``(id, "prepare"|"score", spec, entry, answer, timeout)`` in,
    ``(id, outcome, value)`` out."""
    try:
        _serve_loop(requests, replies, memory, prefork)
    finally:
        if _SPARE[0] is not None:
            _SPARE[0].close()


#: The worker's spare child (one at most).
_SPARE: list[_Spare | None] = [None]


def _replace_spare(specs: set[ScorerSpec], memory: int) -> None:
    if _SPARE[0] is not None:
        _SPARE[0].close()
    _SPARE[0] = _Spare(frozenset(specs), memory)


def _serve_loop(requests: Connection, replies: Connection, memory: int, prefork: bool) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the env process's business
    with contextlib.suppress(ImportError):
        import reasoning_gym  # noqa: F401 - the slow import, once, before any time limit
    os.chdir("/")
    own = (requests.fileno(), replies.fileno())
    gc.freeze()
    prepared: set[ScorerSpec] = set()
    replies.send(("ready", os.getpid()))
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        rid, kind, spec, entry, answer, timeout = request
        used: _Spare | None = None
        try:
            if kind == "prepare":
                _scorer(spec)
                gc.freeze()  # what is built stays out of the collector: forks share its pages
                prepared.add(spec)
                if prefork:  # a spare forked before this dataset was built cannot run it
                    _replace_spare(prepared, memory)
                outcome: tuple[str, Any] = ("ok", None)
            elif prefork and spec in prepared:
                spare = _SPARE[0]
                if spare is None or spec not in spare.specs:
                    _replace_spare(prepared, memory)
                    spare = _SPARE[0]
                _SPARE[0] = None
                assert spare is not None
                used = spare
                outcome = spare.score_answer(spec, entry, answer, timeout,
                                      lambda: _replace_spare(prepared, memory))
            else:
                outcome = _fork_and_score(spec, entry, answer, timeout, own, memory)
        except Exception as exc:  # noqa: BLE001 - building a dataset may raise anything
            outcome = ("scorer_error", f"{type(exc).__name__}: {exc}"[:300])
        replies.send((rid, *outcome))
        if used is not None:  # once the verdict is on its way: reap the killed child
            used.close()


# -- in the env process --------------------------------------------------------------------------
class ScorerWorker:
    """The env process's handle on the worker: started on first use, replaced after a failure.
    Thread-safe: the learner grades groups concurrently; one request at a time goes through."""

    def __init__(self, memory_bytes: int = WORKER_MEMORY, prefork: bool = True) -> None:
        self.memory_bytes, self.prefork = memory_bytes, prefork
        self._lock = threading.Lock()
        self._worker: WorkerProcess | None = None
        self._ids = itertools.count(1)
        #: Specs whose dataset the live worker has built (a dataset may take seconds to build:
        #: that is not the scorer's time).
        self._prepared: set[ScorerSpec] = set()
        self._owner = os.getpid()

    def score(self, spec: ScorerSpec, entry: dict[str, Any], answer: str,
              timeout: float) -> tuple[str, Any]:
        """``("ok", score)``, ``("scorer_error", why)``, ``("timeout", why)`` or
        ``("infra_error", why)`` (the worker failed: no verdict)."""
        with self._lock:
            if self._owner != os.getpid():  # a forked copy of the env process: its own worker
                self._worker, self._owner = None, os.getpid()
                self._prepared.clear()
            if self._worker is None or not self._worker.alive():
                self._stop()
                try:
                    mode = "prefork" if self.prefork else "fork-per-answer"
                    self._worker = WorkerProcess(MODULE, (str(self.memory_bytes), mode), READY_S,
                                                 env=_ONE_THREAD)
                except (RuntimeError, OSError) as exc:
                    return "infra_error", f"the reasoning-gym scorer worker: {exc}"
            if spec not in self._prepared:
                outcome = self._ask("prepare", spec, None, None, READY_S, READY_S)
                if outcome[0] != "ok":
                    return outcome
                self._prepared.add(spec)
            return self._ask("score", spec, entry, answer, timeout, timeout + REPLY_SLACK_S)

    def pid(self) -> int | None:
        with self._lock:
            return None if self._worker is None else self._worker.pid

    def _ask(self, kind: str, spec: ScorerSpec, entry: Any, answer: Any, timeout: float,
             wait: float) -> tuple[str, Any]:
        assert self._worker is not None
        rid = next(self._ids)
        try:
            self._worker.tx.send((rid, kind, spec, entry, answer, timeout))
        except (OSError, ValueError) as exc:
            self._stop()
            return "infra_error", f"cannot reach the scorer worker: {exc}"[:300]
        except Exception as exc:  # noqa: BLE001 - an entry that does not pickle
            return "scorer_error", f"cannot send the task to the scorer: {exc}"[:300]
        if not self._worker.rx.poll(wait):
            self._stop()
            return "infra_error", f"the scorer worker did not reply within {wait:g} s"
        try:
            reply = self._worker.rx.recv()
        except (EOFError, OSError) as exc:
            self._stop()
            return "infra_error", f"the scorer worker died: {exc}"[:300]
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] == rid):
            self._stop()
            return "infra_error", (f"the scorer worker's reply does not match request {rid}: "
                                   f"{str(reply)[:80]}")
        return reply[1], reply[2]

    def _stop(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self._worker = None
        self._prepared.clear()

    def close(self) -> None:
        with self._lock:
            self._stop()


WORKER = ScorerWorker()
atexit.register(WORKER.close)


def _main() -> None:
    import sys

    memory = int(sys.argv[1]) if len(sys.argv) > 1 else WORKER_MEMORY
    prefork = sys.argv[2] != "fork-per-answer" if len(sys.argv) > 2 else True
    _serve(*worker_connections(), memory, prefork)


if __name__ == "__main__":
    _main()
