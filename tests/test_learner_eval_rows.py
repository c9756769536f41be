"""Held-out evaluation generates no more rows at once than a training step does, unless told:
64 long-schema prompts at once held 1.1 GB more than a step of the JSON recipe on CPU."""

from __future__ import annotations

import pytest

from learner.config import Config, ConfigError
from learner.evaluation import during_training, heldout
from tests import learner_helpers as helpers


def test_eval_rows_follow_the_steps_rows_unless_the_flag_is_given():
    assert Config(prompts_per_step=4, group_size=8).eval_rows == 32
    assert Config(prompts_per_step=16, group_size=8).eval_rows == 128
    assert Config(prompts_per_step=4, group_size=8, eval_batch_size=5).eval_rows == 5
    with pytest.raises(ConfigError, match="--eval-batch-size must be >= 0"):
        Config(eval_batch_size=-1).validate()


def test_a_held_out_evaluation_generates_in_calls_of_a_steps_rows(tmp_path, monkeypatch):
    calls: list[int] = []
    real = heldout.sample_graded

    def counted(engine, tokenizer, env, chunk, prompts, **kwargs):
        calls.append(len(prompts))
        return real(engine, tokenizer, env, chunk, prompts, **kwargs)

    monkeypatch.setattr(heldout, "sample_graded", counted)
    env = helpers.ShortEnv()
    tasks = [env.pack.task_at("test", i) for i in range(7)]
    c = helpers.config(tmp_path, prompts_per_step=1, group_size=3, eval_batch_size=0, eval_perturbations=False,
                       max_new_tokens=2)
    metrics, records = during_training.heldout_metrics(
        c, helpers.model(), helpers.tokenizer(), env, tasks, scorer=None)
    assert calls == [3, 3, 1]  # P x G = 3 prompts per call, not all 7 at once
    assert metrics["eval/n"] == 7 and len(records) == 7
