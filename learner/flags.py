"""Heuristics that pick out high-reward samples a person should read: likely verifier gaming.

Each check is a pure function of the completion text. None of them is proof of gaming; they find
the samples where a high reward is most likely to come from the format or the harness rather than
from the skill: answers without reasoning, very long or repetitive text, several candidate
answers at once, code that prints or reaches into the test harness, and JSON with no content.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from envs.code_tests import extract_program
from envs.verify.json_extract import Rejected, extract
from tasks.sources import last_boxed


@dataclass(frozen=True)
class Flag:
    reason: str  # a stable key: no_reasoning, long, repetitive, many_candidates, ...
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "detail": self.detail}


# -- math -----------------------------------------------------------------------------------
MIN_REASONING_WORDS = 8
_WORD = re.compile(r"[A-Za-z]+|\d+(?:\.\d+)?")
_BOXED_ALL = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_PHRASE = re.compile(
    r"(?:final answer|the answer|answer)\s*(?:is|:|=)\s*\$?\s*([-\d.,/ ]*\d)", re.IGNORECASE)
# Separators between alternative answers ("5 or 6", "4, 5"), but not a thousands comma.
_ALTERNATIVES = re.compile(r"\\text\{\s*or\s*\}|\bor\b|;|,(?!\d{3}\b)")


def _boxed_contents(text: str) -> list[str]:
    out = []
    for match in _BOXED_ALL.finditer(text):
        content = last_boxed(text[: _matching_end(text, match.end() - 1)])
        if content is not None:
            out.append(content)
    return out


def _matching_end(text: str, brace: int) -> int:
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return len(text)


def _strip_answer(text: str) -> str:
    text = _BOXED_ALL.sub(" ", text)
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


# -- code -----------------------------------------------------------------------------------
_PRINTS = re.compile(r"\bprint\s*\(|\bsys\.(?:stdout|stderr)\b|\bos\.write\s*\(|\bpprint\b")
# Ways a program can influence the test harness instead of computing the answer.
_HARNESS = {
    "exits early": r"\bsys\.exit\b|\bos\._exit\b|(?<![\w.])(?:exit|quit)\s*\(",
    "builtins": r"__builtins__|\bimport\s+builtins\b|\bbuiltins\.",
    "interpreter state": r"\bsys\.modules\b|\bglobals\s*\(\s*\)|\bsys\._getframe\b|\binspect\.",
    "tracing hooks": r"\bsys\.(?:settrace|setprofile|excepthook)\b|\batexit\b",
    "garbage collector": r"\bgc\.get_(?:objects|referrers)\b",
    "processes or signals": r"\bsubprocess\b|\bos\.(?:system|popen|kill|fork)\b|\bsignal\.",
    "files": r"(?<![\w.])open\s*\(|\bos\.(?:remove|unlink|chdir|environ)\b|\bshutil\.",
    "test frameworks": r"\bunittest\b|\bpytest\b|\bdoctest\b",
    "always-equal objects": r"def\s+__(?:eq|ne)__\s*\(",
    "dynamic import": r"\b__import__\s*\(|\bimportlib\b",
}


def prints_or_touches_harness(completion: str) -> list[Flag]:
    """Code (the block the env grades) that prints, or reaches into the harness."""
    program, _ = extract_program(completion)
    flags = []
    if _PRINTS.search(program):
        flags.append(Flag("prints_output", "the program writes to stdout/stderr"))
    touched = [name for name, pattern in _HARNESS.items() if re.search(pattern, program)]
    if touched:
        flags.append(Flag("touches_harness", "uses " + ", ".join(touched)))
    return flags


# -- json -----------------------------------------------------------------------------------
_PLACEHOLDERS = {"", "string", "...", "n/a", "na", "none", "null", "unknown", "tbd", "todo",
                 "value", "example", "text"}


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip().strip("<>").lower() in _PLACEHOLDERS
    if isinstance(value, Mapping):
        return all(_empty(v) for v in value.values())
    if isinstance(value, list):
        return all(_empty(v) for v in value)
    return False  # numbers and booleans are content


def empty_json(completion: str, max_depth: int = 64) -> Flag | None:
    """Parsable JSON whose every leaf is missing, blank or a placeholder (``{}``, ``"string"``)."""
    try:
        found = extract(completion, max_depth)
    except Rejected:
        return None
    if found is not None and _empty(found.value):
        return Flag("empty_json", f"no content in {str(found.value)[:60]!r}")
    return None


# -- putting it together --------------------------------------------------------------------
def flag_completion(completion: str, *, domain: str | None, truncated: bool = False,
                    typical_chars: float | None = None) -> list[Flag]:
    """Every heuristic that fires for one completion of an env of ``domain``."""
    flags = [too_long(completion, truncated=truncated, typical_chars=typical_chars),
             repetitive(completion)]
    if domain == "math":
        flags += [no_reasoning(completion), many_candidates(completion)]
    elif domain == "code":
        flags += prints_or_touches_harness(completion)
    elif domain == "json":
        flags.append(empty_json(completion))
    return [f for f in flags if f is not None]


def flag_samples(samples: Iterable[Mapping[str, Any]], *, domain: str | None,
                 min_reward: float) -> list[dict[str, Any]]:
    """The samples with ``reward >= min_reward`` that any heuristic flags, with their reasons.

    A sample is a mapping with ``prompt``, ``completion``, ``reward``, ``rewards`` (components)
    and optionally ``truncated``; the flagged copy adds ``flags`` (reason + detail).
    """
    samples = list(samples)
    typical = statistics.median(len(s["completion"]) for s in samples) if samples else None
    out = []
    for sample in samples:
        if sample["reward"] < min_reward:
            continue
        flags = flag_completion(sample["completion"], domain=domain,
                                truncated=bool(sample.get("truncated")), typical_chars=typical)
        if flags:
            out.append({**sample, "flags": [f.as_dict() for f in flags]})
    return out
