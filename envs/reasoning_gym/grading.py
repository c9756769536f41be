"""Grading a reasoning-gym answer under grpo-gym's rules.

Three kinds of task (``kind_of``): ``number`` (every gold is a number literal: one final
``\\boxed{}`` graded by the math checker, simplest-form rule included), ``exact`` (the task has
no scorer of its own: the one ``<answer>`` block must equal the gold) and ``scorer`` (the task's
own ``score_answer`` knows several valid answers: puzzles, countdown, sudoku). A scorer sees the
extracted answer alone, never the completion, under a length bound and a time limit, in a worker
process that is replaced when it hangs; only its full score counts, so its substring partial
credit (``len(gold) / len(answer)``) pays nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import math
import multiprocessing
import os
import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from envs.verify.verdict import Verdict
from sandbox.host_confine import confine

NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:/[0-9]+)?")
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: A scorer's answer may be at most this many times the gold's length (and at least the floor).
LENGTH_FACTOR = 4
LENGTH_FLOOR = 256
LENGTH_NO_GOLD = 4096
#: A scorer's score must reach this to count (a float scorer may return 0.9999999).
FULL_SCORE = 1.0 - 1e-9
#: Seconds a new worker may take to import reasoning-gym before it answers "ready".
READY_S = 120.0
#: The worker's address space: an answer that asks for more (``"a" * 10**12``) fails there.
WORKER_MEMORY = 4 << 30


def is_number(gold: Any) -> bool:
    return isinstance(gold, str) and NUMBER.fullmatch(gold.strip()) is not None


def answer_block(completion: str) -> tuple[str | None, str]:
    """The text of the one ``<answer>`` block and ``"ok"``, or ``None`` and why there is none:
    ``no_answer`` (no closed block) or ``several_answers`` (a hedge: two blocks or more, which
    earn nothing even when they agree)."""
    blocks = _ANSWER_BLOCK.findall(completion)
    if not blocks:
        return None, "no_answer"
    if len(blocks) > 1:
        return None, "several_answers"
    return blocks[0].strip(), "ok"


def normalise(text: str) -> str:
    """Whitespace inside each line collapsed and blank edges dropped: a grid written with a
    trailing space is the same grid."""
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    return "\n".join(lines)


def grade_exact(gold: str, completion: str) -> Verdict:
    answer, why = answer_block(completion)
    if answer is None:
        return Verdict.fail(why)
    if normalise(answer) == normalise(gold):
        return Verdict.ok("equal", answer)
    return Verdict.fail("not_equal", answer)


def length_bound(gold: Any) -> int:
    if isinstance(gold, str) and gold:
        return max(LENGTH_FLOOR, LENGTH_FACTOR * len(gold))
    return LENGTH_NO_GOLD


def grade_scorer(scorer: ScorerSpec, entry: dict[str, Any], completion: str,
                 timeout: float) -> Verdict:
    answer, why = answer_block(completion)
    if answer is None:
        return Verdict.fail(why)
    bound = length_bound(entry.get("answer"))
    if len(answer) > bound:
        return Verdict.fail("too_long", answer[:80], chars=len(answer), bound=bound)
    outcome, value = WORKER.score(scorer, entry, answer, timeout)
    if outcome != "ok":
        return Verdict.fail(outcome, answer, error=value)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return Verdict.fail("scorer_error", answer, error=f"the scorer returned {value!r}")
    if value >= FULL_SCORE:
        return Verdict.ok("scorer_full", answer, scorer_score=float(value))
    return Verdict.fail("scorer_partial" if value > 0 else "not_equal", answer,
                        scorer_score=float(value))


# -- the scorer worker ------------------------------------------------------------------------
#: ``("rg", task, config items)``: the dataset's own ``score_answer``; ``("call",
#: "module:function")``: a function ``(answer, entry) -> float`` (tests use it).
ScorerSpec = tuple[str, ...]


@lru_cache(maxsize=64)
def _scorer(spec: ScorerSpec) -> Callable[[str, dict[str, Any]], float]:
    if spec[0] == "call":
        module, _, name = spec[1].partition(":")
        return getattr(importlib.import_module(module), name)
    from envs.reasoning_gym.generator import make_dataset

    _, task, config = spec
    return make_dataset(task, config_from_key(config), seed=0, size=1).score_answer


def config_key(config: dict[str, Any]) -> str:
    return repr(sorted(config.items()))


def config_from_key(key: str) -> dict[str, Any]:
    import ast

    return dict(ast.literal_eval(key))


def _serve(conn: Any) -> None:
    """The worker's loop: say "ready" once reasoning-gym is imported, then score each request,
    answering ("ok", score) or ("scorer_error", message)."""
    with contextlib.suppress(ImportError):
        import reasoning_gym  # noqa: F401 - the slow import, before the first time limit runs
    # Some scorers eval the answer (``eval``, sympy's ``parse_expr``): the model's text would
    # run here. Confined, it can start no process, open no socket and change no file; where it
    # cannot be confined, no scorer runs at all.
    os.chdir("/")
    try:
        confine(memory_bytes=WORKER_MEMORY)
        refused = None
    except OSError as exc:
        refused = f"the scorer worker cannot be confined here ({exc}), so no scorer runs"
    conn.send(("ready", None))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        spec, entry, answer = request
        if refused is not None:
            conn.send(("scorer_error", refused))
            continue
        try:
            scorer = _scorer(spec)  # built once per spec: a "prepare" request (entry None)
            conn.send(("ok", None if entry is None else scorer(answer, entry)))
        except Exception as exc:  # noqa: BLE001 - an upstream scorer may raise anything
            conn.send(("scorer_error", f"{type(exc).__name__}: {exc}"[:300]))


class ScorerWorker:
    """One worker process for the scorers, started on first use and replaced after a hang.
    Thread-safe: the learner grades groups concurrently, one request at a time goes through."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Any = None
        #: Specs whose scorer the live worker has built (a dataset may take seconds to build:
        #: that is not the scorer's time).
        self._prepared: set[ScorerSpec] = set()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process that holds threads
        parent, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), daemon=True,
                                    name="grpo-rg-scorer")
        self._process.start()
        child.close()
        self._conn = parent
        if not parent.poll(READY_S):
            self._stop()
            raise RuntimeError(f"the reasoning-gym scorer worker did not start in {READY_S} s")
        parent.recv()

    def score(self, spec: ScorerSpec, entry: dict[str, Any], answer: str,
              timeout: float) -> tuple[str, Any]:
        """``("ok", score)``, ``("scorer_error", why)`` or ``("timeout", why)``."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                try:
                    self._start()
                except (RuntimeError, OSError) as exc:
                    return "scorer_error", str(exc)
            if spec not in self._prepared:
                outcome = self._ask((spec, None, None), READY_S)
                if outcome[0] != "ok":
                    return outcome
                self._prepared.add(spec)
            return self._ask((spec, entry, answer), timeout)

    def _ask(self, request: tuple[Any, ...], timeout: float) -> tuple[str, Any]:
        """One request to the live worker (the lock held); a hang or a death stops it."""
        try:
            self._conn.send(request)
        except Exception as exc:  # noqa: BLE001 - an entry that does not pickle
            return "scorer_error", f"cannot send the task to the scorer: {exc}"[:300]
        if not self._conn.poll(timeout):
            self._stop()
            return "timeout", f"the scorer did not answer within {timeout:g} s"
        try:
            return self._conn.recv()
        except (EOFError, OSError) as exc:
            self._stop()
            return "scorer_error", f"the scorer's worker died: {exc}"

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
        self._prepared.clear()

    def close(self) -> None:
        with self._lock:
            self._stop()


WORKER = ScorerWorker()
atexit.register(WORKER.close)
