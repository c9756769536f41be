"""The one finder of ``\\boxed{}`` / ``\\fbox{}`` answers.

Packs read their golds with it (``last_box``), the math checker extracts answers with it, the
format reward and the reward-hack flags judge boxes with it: one rule for what a box is, so a
completion cannot be "boxed" for one of them and not for another.

A box is ``\\boxed{...}`` with balanced braces (escaped braces ``\\{`` do not count), or the
brace-less ``\\boxed 5`` form, which boxes one token, as LaTeX does: one character. ``\\boxed 10``
and ``\\boxed10`` render a box of 1 followed by 0, so a brace-less box before more characters of
the same run is *bad*: neither 1 nor 10 is what it says (a trusted gold still reads the run). So is
a command that only starts like a box (``\\boxedby{5}``; the lengths ``\\fboxsep``/``\\fboxrule``
excepted), and a brace-less box before a ``}`` that nothing opened (``\\boxed4 \\div 1}``: its
``{`` is missing, so what it holds is unknown). A box inside another box is part of the
outer box's content, and the outer box is *nested*: ``\\boxed{2 + \\boxed{6}}`` is malformed, not
a way to box ``6``. An unclosed ``\\boxed{18`` is not a box, except for a trusted gold (``lenient``),
where it runs to the end of the text. A completion with an unclosed or a nested box anywhere
(``malformed``) has no well-formed answer: ``\\boxed{8 or \\boxed{7}`` and
``\\boxed{7} or maybe \\boxed{8`` hedge, and the closed box among them is not the answer.

It lives under ``tasks/`` because packs, the first stage of the data path, need it; envs and the
learner import it from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The command ends where its letters do (LaTeX's rule): \boxed10 is \boxed then 1 then 0.
_BOX_START = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])\s*")
#: A box command anywhere (inside an answer it marks a nested, malformed box).
BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# The run a brace-less box stands before (a sentence's full stop is not part of it).
_TOKEN = re.compile(r"-?\w+(?:\.\w+)*")
# A command that starts like a box but is not one (\boxedby, \fboxed); \fboxsep and \fboxrule
# are lengths that honest LaTeX sets.
_BOX_LOOKALIKE = re.compile(r"\\(?:boxed|fbox)(?!(?:sep|rule)(?![A-Za-z]))[A-Za-z]+")


@dataclass(frozen=True)
class Box:
    start: int  # index of the backslash
    end: int  # one past the closing brace (or the token)
    content: str
    closed: bool  # False only for a lenient, unclosed gold box
    nested: bool  # another box inside: malformed

    @property
    def well_formed(self) -> bool:
        return self.closed and not self.nested


_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.S)


def _brace_pairs(text: str) -> dict[int, int]:
    """Map each ``{`` index to its matching ``}`` index, in one linear pass (over the braces and
    escapes only, so a long completion costs what its braces do)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE_OR_ESCAPE.finditer(text):
        c = m.group(0)
        if c == "{":
            stack.append(m.start())
        elif c == "}" and stack:
            pairs[stack.pop()] = m.start()
    return pairs


def find_boxes(text: str, *, lenient: bool = False) -> list[Box]:
    """The top-level boxes of ``text``, in order (linear time)."""
    boxes: list[Box] = []
    pairs: dict[int, int] | None = None
    covered = -1
    for m in _BOX_START.finditer(text):
        if m.start() < covered:
            continue  # inside the previous box: it makes that box nested, not a new one
        pos = m.end()
        closed = True
        if pos < len(text) and text[pos] == "{":
            if pairs is None:
                pairs = _brace_pairs(text)
            close = pairs.get(pos)
            if close is None:
                if not lenient:
                    continue
                end, content, closed = len(text), text[pos + 1 :], False
            else:
                end, content = close + 1, text[pos + 1 : close]
        else:
            tok = _TOKEN.match(text, pos, min(len(text), pos + 100))
            if not tok or (len(tok.group(0)) > 1 and not lenient):
                continue  # a box of its first character only: bad (``bad_commands``)
            end, content = tok.end(), tok.group(0)
        covered = end
        nested = bool(BOX_COMMAND.search(content))
        boxes.append(Box(m.start(), end, content, closed, nested))
    return boxes


def last_box(text: str) -> str | None:
    """Content of the last closed box of ``text`` (a gold solution), stripped; ``None`` if none."""
    boxes = find_boxes(text)
    return boxes[-1].content.strip() if boxes else None


def unclosed(text: str) -> list[int]:
    """Start of each box command whose ``{`` is never closed (``\\boxed{8 or \\boxed{7}``)."""
    pairs: dict[int, int] | None = None
    found = []
    for m in _BOX_START.finditer(text):
        pos = m.end()
        if pos < len(text) and text[pos] == "{":
            if pairs is None:
                pairs = _brace_pairs(text)
            if pos not in pairs:
                found.append(m.start())
    return found


def bad_commands(text: str) -> list[int]:
    """Start of each box command that boxes no answer: a look-alike (``\\boxedby{5}``) or a
    brace-less box before a longer run (``\\boxed10``, ``\\boxed 10``: LaTeX boxes the 1)."""
    found = [m.start() for m in _BOX_LOOKALIKE.finditer(text)]
    last_stray = -1
    for m in _BOX_START.finditer(text):
        tok = _TOKEN.match(text, m.end(), min(len(text), m.end() + 100))
        if tok is not None and len(tok.group(0)) > 1:
            found.append(m.start())
        elif m.end() < len(text) and text[m.end()] != "{":
            # A brace-less box before a closing brace that nothing opened (\boxed4 \div 1}):
            # its opening brace is missing, and what it was meant to hold is unknown.
            if last_stray == -1:
                last_stray = _last_stray_closer(text)
            if last_stray > m.start():
                found.append(m.start())
    return sorted(found)


def _last_stray_closer(text: str) -> int:
    """Index of the last ``}`` that no ``{`` opened (``-2`` when there is none); linear."""
    depth, last = 0, -2
    for m in _BRACE_OR_ESCAPE.finditer(text):
        c = m.group(0)
        if c == "{":
            depth += 1
        elif c == "}":
            if depth:
                depth -= 1
            else:
                last = m.start()
    return last


def malformed(text: str) -> bool:
    """Whether ``text`` has an unclosed box, a box inside a box or a bad box command anywhere
    (linear time)."""
    return (bool(unclosed(text)) or bool(bad_commands(text))
            or any(box.nested for box in find_boxes(text)))
