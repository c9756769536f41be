"""Heuristics that pick out high-reward samples a person should read: likely verifier gaming.

Each check is a pure function of the completion text. None of them is proof of gaming; they find
the samples where a high reward is most likely to come from the format rather than from the
skill. These are the generic ones (answers without reasoning, several candidate answers, very
long or repetitive text) that ``TaskEnv.flag`` applies to any env; a domain adds its own in its
env (code that touches the harness in ``envs.domains.code_flags``, empty JSON in ``envs.domains.json_schema``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from tasks.boxes import BOX_COMMAND, find_boxes


@dataclass(frozen=True)
class Flag:
    reason: str  # a stable key: no_reasoning, long, repetitive, many_candidates, ...
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "detail": self.detail}


# -- answers -----------------------------------------------------------------------------------
MIN_REASONING_WORDS = 8
_WORD = re.compile(r"[A-Za-z]+|\d+(?:\.\d+)?")
_ANSWER_PHRASE = re.compile(
    r"(?:final answer|the answer|answer)\s*(?:is|:|=)\s*\$?\s*([-\d.,/ ]*\d)", re.IGNORECASE)
# Separators between alternative answers ("5 or 6", "4, 5"), but not a thousands comma.
_ALTERNATIVES = re.compile(r"\\text\{\s*or\s*\}|\bor\b|;|,(?!\d{3}\b)")


def _boxed_contents(text: str) -> list[str]:
    return [box.content for box in find_boxes(text)]


def _strip_answer(text: str) -> str:
    text = BOX_COMMAND.sub(" ", text)
    return _ANSWER_PHRASE.sub(" ", text)


def no_reasoning(completion: str, min_words: int = MIN_REASONING_WORDS) -> Flag | None:
    """A bare answer: fewer than ``min_words`` words besides the answer statement itself."""
    words = _WORD.findall(_strip_answer(completion))
    if len(words) < min_words:
        return Flag("no_reasoning", f"only {len(words)} words besides the answer")
    return None


def _normalise(answer: str) -> str:
    return answer.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")


def answer_candidates(completion: str) -> set[str]:
    """Distinct final answers the text commits to (boxed, "the answer is ...")."""
    statements = _boxed_contents(completion) + _ANSWER_PHRASE.findall(completion)
    found: set[str] = set()
    for statement in statements:
        # "\boxed{5 or 6}" restates two answers; "\boxed{\frac{1}{2}}" is one.
        found.update(_normalise(part) for part in _ALTERNATIVES.split(statement))
    found.discard("")
    return found


def many_candidates(completion: str, at_least: int = 2) -> Flag | None:
    candidates = answer_candidates(completion)
    if len(candidates) >= at_least:
        shown = ", ".join(sorted(candidates)[:8])
        return Flag("many_candidates", f"{len(candidates)} different answers stated: {shown}")
    return None


# -- any domain -----------------------------------------------------------------------------
LONG_FACTOR = 3.0
MIN_LONG_CHARS = 400


def too_long(completion: str, *, truncated: bool = False,
             typical_chars: float | None = None) -> Flag | None:
    """Hit the token budget, or ``LONG_FACTOR`` times the typical (median) sample length."""
    if truncated:
        return Flag("long", f"hit the token budget ({len(completion)} chars)")
    if typical_chars and len(completion) >= max(MIN_LONG_CHARS, LONG_FACTOR * typical_chars):
        return Flag("long", f"{len(completion)} chars, median sample {typical_chars:.0f}")
    return None


def repetitive(completion: str, n: int = 4, max_repeat_ratio: float = 0.5,
               min_ngrams: int = 20, line_repeats: int = 3) -> Flag | None:
    """Many repeated word n-grams, or one line said ``line_repeats`` times or more."""
    lines = Counter(line.strip() for line in completion.splitlines() if len(line.strip()) >= 10)
    if lines:
        line, count = lines.most_common(1)[0]
        if count >= line_repeats:
            return Flag("repetitive", f"a line repeated {count} times: {line[:60]!r}")
    words = completion.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if len(grams) >= min_ngrams:
        repeated = 1 - len(set(grams)) / len(grams)
        if repeated > max_repeat_ratio:
            return Flag("repetitive", f"{repeated:.0%} of {n}-word sequences are repeats")
    return None


def answer_flags(completion: str, *, truncated: bool = False,
                 typical_chars: float | None = None,
                 min_reasoning_words: int = MIN_REASONING_WORDS) -> list[Flag]:
    """Every generic heuristic (the ``TaskEnv.flag`` default) that fires for ``completion``.

    ``min_reasoning_words`` 0 skips ``no_reasoning``: an env whose task needs no written working
    (one addition) says so, and a bare right answer to it is then nothing to read."""
    reasoning = no_reasoning(completion, min_reasoning_words) if min_reasoning_words else None
    return text_flags(completion, truncated=truncated, typical_chars=typical_chars) + [
        f for f in (reasoning, many_candidates(completion)) if f is not None]


def text_flags(completion: str, *, truncated: bool = False,
               typical_chars: float | None = None) -> list[Flag]:
    """The heuristics for any text, answer or not: too long, repetitive."""
    flags = [too_long(completion, truncated=truncated, typical_chars=typical_chars),
             repetitive(completion)]
    return [f for f in flags if f is not None]
