"""samples.jsonl rows carry each verdict's reason beside its pass/fail (issue 35)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from learner.sampling.scoring import Scores
from learner.training.samples import StepSamples


def test_each_logged_completion_carries_its_verdicts_reason():
    infos = [{"passed": True, "reason": "ok"}, {"passed": False, "reason": "no_answer"},
             {"passed": False}]  # an env that gives no reason: null, not a guess
    roll = SimpleNamespace(texts=["\\boxed{2}", "two", "3"], transcripts=None)
    samples = StepSamples([SimpleNamespace(id="t0")], ["1 + 1?"], roll,
                          Scores.from_results([1.0, 0.0, 0.0], infos), 3)
    (group,) = samples.groups_for_log(1, torch.tensor([0.8, -0.4, -0.4]))
    assert group["reasons"] == ["ok", "no_answer", None]
    assert group["passed"] == [True, False, False]
