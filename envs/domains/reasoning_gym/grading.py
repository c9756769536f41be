"""Grading a reasoning-gym answer under grpo-gym's rules.

Three kinds of task (``kind_of``): ``number`` (every gold is a number literal: one final
``\\boxed{}`` graded by the math checker, simplest-form rule included), ``exact`` (the task has
no scorer of its own: the one ``<answer>`` block must equal the gold) and ``scorer`` (the task's
own ``score_answer`` knows several valid answers: puzzles, countdown, sudoku). A scorer sees the
extracted answer alone, never the completion, under a length bound, only once it matches its
task's answer grammar (``answer_grammar``: model text never reaches an ``eval``) and the form of
its answer (``answer_forms``: a grid, a word, a JSON list ...; a one-value answer, a
probability or a truth value, must also have the gold's value), and in a fresh
confined process per answer under a time limit (``scorer_worker``); only its full score counts,
so its substring partial credit (``len(gold) / len(answer)``) pays nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any

from envs.domains.reasoning_gym.answer_forms import check_form, same_value
from envs.domains.reasoning_gym.answer_grammar import Refused, evaluates_text, safe_answer
from envs.domains.reasoning_gym.scorer_worker import WORKER, ScorerSpec, config_from_key, config_key
from envs.verify.verdict import Verdict

__all__ = ["ScorerSpec", "config_from_key", "config_key", "grade_exact", "grade_scorer"]

NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:/[0-9]+)?")
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: A scorer's answer may be at most this many times the gold's length (and at least the floor).
LENGTH_FACTOR = 4
LENGTH_FLOOR = 256
LENGTH_NO_GOLD = 4096
#: A scorer's score must reach this to count (a float scorer may return 0.9999999).
FULL_SCORE = 1.0 - 1e-9


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
    task = scorer[1] if scorer[0] == "rg" else None
    try:
        seen = safe_answer(task, answer, entry, evaluates=task is not None and evaluates_text(task))
        check_form(task, answer)
    except Refused as exc:
        return Verdict.fail("not_in_grammar", answer, error=str(exc))
    if not same_value(task, answer, entry):
        # A one-value task whose scorer pays beside the gold (answer_forms.VALUES).
        return Verdict.fail("not_equal", answer)
    outcome, value = WORKER.score(scorer, entry, seen, timeout)
    if outcome == "infra_error":
        # The worker failed, not the answer: the learner drops the sample (envs.base).
        return Verdict.fail("infra_error", answer, sandbox_error=value)
    if outcome != "ok":
        return Verdict.fail(outcome, answer, error=value)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return Verdict.fail("scorer_error", answer, error=f"the scorer returned {value!r}")
    if value >= FULL_SCORE:
        return Verdict.ok("scorer_full", answer, scorer_score=float(value))
    return Verdict.fail("scorer_partial" if value > 0 else "not_equal", answer,
                        scorer_score=float(value))
