"""What the reward search counts as a correct answer: a check of the gold's own, independent of
the scorer under test, so that a completion the scorer pays and this check refuses is a paid
wrong answer (``envs.tools.card.search``).

- **MathExact**: Math-Verify (the field's reference checker, not our parser) finds the gold's
  value as the completion's first answer (a number in ``\\text{}`` read as that number); where
  it reads no answer at all, a completion whose only number is the gold's (a number) is
  correct. It compares values only: forms it also credits (an unsimplified fraction) are the
  honest and hack corpora's business, not the search's.
- **JsonSchema**: the completion, read by ``json.loads`` (whole, or the one fenced block),
  equals the gold value (``gold_completion``) with numbers compared by value. A task with no
  gold value is left out of the search.
- **ReasoningGym**: the text in the completion's last answer tag (``<answer>``, else
  ``\\boxed{}``; a box inside the tag is read) is the dataset's gold answer, ``\\text{}`` and
  whitespace aside (numbers by value, ``3/8`` as 0.375; a fraction in lowest terms only). For a task with several right answers (n_queens, countdown,
  puzzle24) that text is instead checked by the task's rules (``env.right_answer``, written in
  ``envs.domains.reasoning_gym.answer_validity`` from the puzzle's data, not from the scorer that pays
  nor our answer grammar): another valid placement or expression is right, not a hack.
- **CodeTests**, and any other env: the completion holds the gold completion verbatim. The
  search only rewrites shallow seeds, so it never writes a program: any full pass it finds is a
  wrong program paid.
"""

from __future__ import annotations

import json
import math
import re
import threading
from fractions import Fraction
from typing import Any

from envs.base import TaskEnv
from tasks import Task

_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.S)
#: Seconds Math-Verify may take to parse or compare one answer.
MATH_TIMEOUT_S = 5
_NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
_TEXT = re.compile(r"\\text\{([^{}]*)\}")
_BRACED_BOX = re.compile(r"\\boxed\s*\{")
_BRACELESS_BOX = re.compile(r"\\boxed(?![A-Za-z{])\s*([A-Za-z0-9])")
_TEXT_NUMBER = re.compile(r"\\text\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


def correct(env: TaskEnv, task: Task, completion: str) -> bool:
    """Whether ``completion`` is a correct answer to ``task`` by the reference (module doc)."""
    gold = env.gold_completion(task)
    if gold is None:
        return False
    kinds = {cls.__name__ for cls in type(env).__mro__}  # a subclass keeps its domain's check
    if "MathExactEnv" in kinds:
        return _math(gold, completion)
    if "JsonSchemaEnv" in kinds:
        return _json(gold, completion)
    if "ReasoningGymEnv" in kinds:
        return _tagged(env, task, completion)
    return gold.strip() != "" and gold.strip() in completion


def usable(env: TaskEnv, task: Task) -> bool:
    """Whether the search can judge answers to ``task`` (it has a gold to compare with)."""
    try:
        return env.gold_completion(task) is not None
    except Exception:  # noqa: BLE001 - a domain's hook may raise: no reference, no search
        return False


def _math(gold: str, completion: str) -> bool:
    from math_verify import parse, verify

    # Math-Verify's timeouts use signal.alarm, which only the main thread may set.
    limit = MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    # A number in a text command is that number ("\boxed{\text{02}}" is 2), which Math-Verify
    # reads as the word "02": values only, as above.
    completion = _TEXT_NUMBER.sub(r"\1", completion)
    expected = parse(gold, parsing_timeout=limit)
    found = parse(completion, extraction_mode="first_match", parsing_timeout=limit)
    if expected and found:
        return bool(verify(expected, found, timeout_seconds=limit))
    # Math-Verify read no answer (stray braces around it): a completion whose one number is
    # the gold's number states it.
    numbers = _NUMBERS.findall(completion)
    golds = _NUMBERS.findall(gold)
    return len(numbers) == 1 and len(golds) == 1 and float(numbers[0]) == float(golds[0])


def _json(gold: str, completion: str) -> bool:
    text = completion.strip()
    fenced = _FENCE.findall(text)
    if len(fenced) == 1 and text.startswith("```"):
        text = fenced[0].strip()
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return _canon(value) == _canon(json.loads(gold))


def _canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return ("number", float(value)) if math.isfinite(float(value)) else ("number", None)
    if isinstance(value, list):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    return value


def _tagged(env: TaskEnv, task: Task, completion: str) -> bool:
    tags = _ANSWER_TAG.findall(completion) or _boxed(completion)
    if not tags:
        return False
    last = tags[-1].replace("<answer>", "")
    inner = _boxed(last)  # a box inside the tag: the answer is what it holds
    text = inner[-1] if inner else last
    rules = getattr(env, "right_answer", None)  # a task with several right answers
    right = rules(task, text) if rules is not None else None
    if right is not None:
        return right
    answer, want = _plain(text), _plain(str(task["answer"]))
    if answer == want:
        return True
    try:
        return math.isclose(_number(answer), _number(want), rel_tol=1e-9, abs_tol=1e-12)
    except (ValueError, ZeroDivisionError):
        return False


def _number(text: str) -> float:
    """A number, or a fraction of integers in lowest terms (``3/8`` is the probability 0.375;
    ``6/16`` and ``4/2`` are not simplified: no number here), as a float."""
    if "/" in text:
        top, bottom = (int(x) for x in text.replace(" ", "").split("/"))
        if bottom <= 1 or math.gcd(top, bottom) != 1:
            raise ValueError("not a fraction in lowest terms")
        return float(Fraction(top, bottom))
    return float(text)


def _boxed(text: str) -> list[str]:
    """The contents of each ``\\boxed{...}``, braces balanced, and of each brace-less
    ``\\boxed 5``, which boxes one character as LaTeX does; in order."""
    found, start = [], 0
    while (m := _BRACED_BOX.search(text, start)) is not None:
        at, depth, end = m.start(), 0, len(text)
        for i in range(m.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found.append((at, text[m.end():i]))
                end = i
                break
        start = end + 1
    found += [(m.start(), m.group(1)) for m in _BRACELESS_BOX.finditer(text)]
    return [content for _, content in sorted(found)]


def _plain(text: str) -> str:
    """``text`` without ``\\text{}`` wrappers, thin spaces and runs of whitespace."""
    while (unwrapped := _TEXT.sub(r"\1", text)) != text:
        text = unwrapped
    return " ".join(text.replace("\\,", " ").split())
