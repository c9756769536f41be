"""A training run's held-out evaluation comes back as ``HeldOut``: metrics to log, records to
keep, and, from the records themselves, whether to say that no accuracy was reported (the loop
decides on the records, never on the logged metric keys)."""

from __future__ import annotations

from learner.evaluation.during_training import HeldOut


def _records(ok: int, failed: int) -> list[dict]:
    good = [{"task_id": f"t{i}", "passed": True, "infra_error": False} for i in range(ok)]
    bad = [{"task_id": f"f{i}", "passed": False, "infra_error": True,
            "infra_reason": "cannot reach a Docker engine"} for i in range(failed)]
    return good + bad


def test_an_evaluation_with_an_accuracy_says_nothing():
    assert HeldOut({}, _records(200, 2)).refusal() is None  # 1% of 202: still reported


def test_too_many_infrastructure_failures_are_said_with_the_first_reason():
    held_out = HeldOut({"eval/accuracy": None}, _records(1, 3))
    assert (held_out.infra.samples, held_out.infra.failures) == (4, 3)
    assert held_out.refusal() == (
        "no held-out accuracy: 3 of 4 samples were infrastructure failures, more than 1% "
        "(first: cannot reach a Docker engine)")


def test_an_evaluation_of_nothing_says_so_whatever_its_metrics_hold():
    # Metrics are only reported: a stray key cannot hide the line.
    assert HeldOut({"eval/accuracy": 1.0}, []).refusal() == (
        "no held-out accuracy: nothing evaluated")
