"""Held-out evaluation: metrics from records, and a run over a test split with pass@k."""

import pytest

from learner.evaluation.heldout import EvalResult, evaluate, heldout_tasks
from tests import learner_helpers as h


def _record(correct, components, samples=4, samples_correct=0, infra=False):
    return {"task_id": "t", "completion": "", "passed": correct, "reward": float(correct),
            "components": components, "infra_error": infra, "samples": samples,
            "samples_correct": samples_correct}


def test_metrics_from_records():
    result = EvalResult(k=2, records=[
        _record(True, {"correct": 1.0, "format": 1.0}, samples_correct=4),
        _record(True, {"correct": 1.0, "format": 0.0}, samples_correct=1),
        _record(False, {"correct": 0.0, "format": 1.0}),
        _record(False, {"correct": 0.0, "format": 0.0}),
    ])
    m = result.metrics()
    assert m["n"] == 4 and m["infra_errors"] == 0 and "infra_reason" not in m
    assert m["accuracy"] == pytest.approx(2 / 4)
    assert m["full_marks"] == pytest.approx(1 / 4)
    assert m["reward/format"] == pytest.approx(2 / 4)
    assert m["pass@2"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)  # 1 - C(3,2)/C(4,2) = 0.5
    # One infrastructure failure of 4 is more than 1%: no figure, the count instead.
    result.records[3]["infra_error"] = True
    m = result.metrics()
    assert m["n"] == 4 and m["infra_errors"] == 1
    assert m["accuracy"] is m["full_marks"] is m["reward/format"] is None


def test_evaluate_on_the_test_split():
    env = h.ShortEnv()
    tasks = heldout_tasks(env, size=3)
    assert [t.split for t in tasks] == ["test"] * 3
    result = evaluate(h.model(), h.tokenizer(), env, tasks, max_new_tokens=4, k=2, samples=3,
                      batch_size=2)
    assert [r["task_id"] for r in result.records] == [t.id for t in tasks]
    assert all(r["samples"] == 3 for r in result.records)
    assert {"n", "accuracy", "pass@2", "reward/short", "full_marks"} <= set(result.metrics())
