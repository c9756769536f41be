"""Every gold of the built-in math packs must earn the reward when a model writes it.

A gold the checker cannot match against itself is a task that can never be rewarded in
training (``python -m envs validate`` refuses such a pack). MATH golds include matrices
(``\\begin{pmatrix} 6 \\\\ 3 \\end{pmatrix}``) and labelled numbers
(``81\\text{ teachers}``), which once fell back to their last number when the gold was
read; these tests run every gold, not a sample.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from envs.verify.math import verify
from envs.verify.math_extract import extract
from envs.verify.math_normalize import normalize_answer
from tasks import load_pack

PACKS = ("math", "math500", "gsm8k")
SIZES = {"math": 5000, "math500": 500, "gsm8k": 1319}


@cache
def _golds(name: str) -> tuple[str, ...]:
    pack = load_pack(name)
    return tuple(str(r["answer"]) for s in pack.manifest.splits for r in pack.records(s))


def _boxed(answer: str) -> str:
    return "\\boxed{" + answer + "}"


@pytest.mark.parametrize("name", PACKS)
def test_gold_is_read_whole(name: str) -> None:
    """A bare gold answer is the answer, never just its last number."""
    wrong = []
    for gold in _golds(name):
        ex = extract(gold, gold=True)
        got = ex.answer if ex is not None else None
        if got is None or len(got) != 1 or normalize_answer(got[0]) != normalize_answer(gold):
            wrong.append((gold, got))
    assert not wrong, wrong[:20]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", PACKS)
def test_every_gold_verifies_against_itself_boxed(name: str) -> None:
    golds = _golds(name)
    assert len(golds) == SIZES[name]
    failed = []
    fast = 0
    for gold in golds:
        v = verify(gold, _boxed(gold), timeout=30.0)  # generous: CI machines are busy
        if not v.passed:
            failed.append((gold, v.reason, v.extracted))
        fast += bool(v.details.get("fast_path"))
    assert not failed, failed[:20]
    # The same spelling on both sides must not need a sympy worker.
    assert fast == len(golds)


def _matrix_golds() -> list[str]:
    return [g for g in _golds("math") if "pmatrix" in g]


@pytest.mark.slow
def test_matrix_golds_accept_other_spellings() -> None:
    """bmatrix for pmatrix, \\dfrac for /, and a column vector written as a tuple."""
    golds = _matrix_golds()
    assert len(golds) >= 70
    failed = []
    for gold in golds:
        variants = [gold.replace("pmatrix", "bmatrix")]
        variants.append(re.sub(r"(-?)(\d+)/(\d+)", r"\1\\dfrac{\2}{\3}", gold))
        if "&" not in gold:  # a column vector
            rows = re.sub(r"\\(?:begin|end)\{pmatrix\}", "", gold).split("\\\\")
            variants.append("(" + ", ".join(r.strip() for r in rows) + ")")
        for pred in variants:
            if not verify(gold, _boxed(pred), timeout=30.0).passed:
                failed.append((gold, pred))
    assert not failed, failed[:20]


def test_matrix_golds_reject_a_changed_entry() -> None:
    gold = next(g for g in _matrix_golds() if "& -8064" in g)
    assert verify(gold, _boxed(gold)).passed
    assert not verify(gold, _boxed(gold.replace("-8064", "-8065"))).passed


_LABELLED = re.compile(
    r"(.*?[\d}])\s*(?:\\[;, ])?\s*\\(?:text|mbox)\s*\{\s*[A-Za-z]{2,}[A-Za-z .]*\}"
)


def test_labelled_golds_accept_the_bare_value() -> None:
    """``81\\text{ teachers}`` is answered by 81, in either direction."""
    pairs = [(g, m.group(1)) for g in _golds("math") if (m := _LABELLED.fullmatch(g))]
    assert len(pairs) >= 30
    failed = [
        (gold, bare)
        for gold, bare in pairs
        if not (verify(gold, _boxed(bare)).passed and verify(bare, _boxed(gold)).passed)
    ]
    assert not failed, failed
