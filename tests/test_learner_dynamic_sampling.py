"""Dynamic sampling keeps the groups whose verdicts differ (DAPO filters on accuracy), unless
--dynamic-sampling-metric reward; a step left short of P says so."""

from __future__ import annotations

import pytest

from learner.config import Config, parse_config
from learner.sampling.scoring import Scores
from learner.training.samples import StepSamples


def _samples(metric: str) -> StepSamples:
    # Three groups of two: (wrong, wrong) with different format rewards; (right, wrong); and
    # (right, right) with equal rewards.
    rewards = [0.1, 0.3, 1.0, 0.0, 1.0, 1.0]
    passed = [False, False, True, False, True, True]
    infos = [{"passed": p, "reason": "ok" if p else "not_equal"} for p in passed]
    tasks = [{"id": f"t{i}"} for i in range(3)]
    return StepSamples(tasks, ["q"] * 3, None, Scores.from_results(rewards, infos), 2,
                       metric=metric)


def test_accuracy_keeps_only_groups_whose_verdicts_differ():
    # The all-wrong group's rewards differ (format alone): informative by reward, not by
    # accuracy, where its advantages would teach format alone.
    assert _samples("accuracy").informative.tolist() == [False, True, False]
    assert _samples("reward").informative.tolist() == [True, True, False]
    assert _samples("accuracy").reward_spread.tolist() == [True, True, False]


def test_the_default_metric_is_accuracy_and_the_flag_takes_reward():
    assert Config().dynamic_sampling_metric == "accuracy"
    cfg = parse_config(["--env-recipe", "off", "--dynamic-sampling",
                        "--dynamic-sampling-metric", "reward"])
    assert cfg.dynamic_sampling_metric == "reward"
    with pytest.raises(SystemExit):
        parse_config(["--dynamic-sampling-metric", "passed"])


def test_a_step_short_of_p_informative_groups_logs_it_and_says_so(tmp_path, capsys):
    from learner.training.trainer import GRPOTrainer
    from tests import learner_helpers as h

    cfg = h.config(tmp_path, eval=False, dynamic_sampling=True, max_sampling_tries=2)
    t = GRPOTrainer(cfg, model=h.model(0), tokenizer=h.tokenizer(), env=h.ConstantEnv())
    first, second = t.train_step().metrics, t.train_step().metrics
    # Every group is flat: after 2 rounds none of the P = 2 is informative.
    assert first["group/informative"] == 0 and first["group/short"] == 2
    assert second["group/short"] == 2
    said = [line for line in capsys.readouterr().out.splitlines() if "informative" in line]
    assert len(said) == 1 and "0 of 2 informative groups after 2 rounds" in said[0]
