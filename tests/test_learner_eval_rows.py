"""Held-out evaluation generates no more rows at once than a training step does, unless told:
64 long-schema prompts at once held 1.1 GB more than a step of the JSON recipe on CPU. A
greedy pass keeps that many rows decoding (finished rows give their place to the next
prompts), over several batches' worth of prompts per generate call."""

from __future__ import annotations

import pytest

from learner.config import Config, ConfigError
from learner.evaluation import during_training, gates, heldout
from learner.stage_config import EvalConfig
from tests import learner_helpers as helpers


def test_eval_rows_follow_the_steps_rows_unless_the_flag_is_given():
    assert Config(prompts_per_step=4, group_size=8).eval_rows == 32
    assert Config(prompts_per_step=16, group_size=8).eval_rows == 128
    assert Config(prompts_per_step=4, group_size=8, eval_batch_size=5).eval_rows == 5
    with pytest.raises(ConfigError, match="--eval-batch-size must be >= 0"):
        Config(eval_batch_size=-1).validate()


def _rows_per_forward(model) -> list[int]:
    """The rows of every forward ``model`` makes from now on."""
    rows: list[int] = []
    model.register_forward_pre_hook(
        lambda mod, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    return rows


@pytest.fixture
def calls(monkeypatch) -> list[int]:
    """The prompts of every ``sample_graded`` call the held-out evaluation makes from now on."""
    counts: list[int] = []
    real = heldout.sample_graded

    def counted(engine, tokenizer, env, chunk, prompts, **kwargs):
        counts.append(len(prompts))
        return real(engine, tokenizer, env, chunk, prompts, **kwargs)

    monkeypatch.setattr(heldout, "sample_graded", counted)
    return counts


def test_a_held_out_evaluation_generates_in_calls_of_a_steps_rows(tmp_path, calls):
    env = helpers.ShortEnv()
    tasks = [env.pack.task_at("test", i) for i in range(7)]
    c = helpers.config(tmp_path, prompts_per_step=1, group_size=3, eval_batch_size=0,
                       eval_perturbations=False, max_new_tokens=2)
    model = helpers.model()
    rows = _rows_per_forward(model)
    metrics, records = during_training.heldout_metrics(
        EvalConfig.of(c), model, helpers.tokenizer(), env, tasks, scorer=None)
    assert calls == [7]  # one call: 3 rows decode at once, refilled as they finish ...
    # ... never more than P x G = 3, not all 7 (after the shared prompt prefix's own forward)
    assert max(rows) == 3 and rows[:2] == [1, 3]
    assert metrics["eval/n"] == 7 and len(records) == 7


def test_perturbed_prompts_share_calls_and_the_original_is_not_generated_again(tmp_path, calls,
                                                                              monkeypatch):
    env = helpers.ShortEnv()
    tasks = [env.pack.task_at("test", i) for i in range(4)]
    variants = len(env.perturbations(tasks[0]))
    c = helpers.config(tmp_path, prompts_per_step=1, group_size=4, eval_batch_size=0,
                       eval_perturbations=True, eval_perturb_size=2, max_new_tokens=6)
    model = helpers.model()
    rows = _rows_per_forward(model)
    metrics, records = during_training.heldout_metrics(
        EvalConfig.of(c), model, helpers.tokenizer(), env, tasks, scorer=None)
    # The held-out prompts and the perturbed ones (the original's answers are the greedy's)
    # in one greedy pass, never more than P x G = 4 rows at once.
    assert calls == [4 + 2 * variants] and max(rows) == 4
    # ... with the answers and figures that separate passes give.
    monkeypatch.undo()
    alone = heldout.evaluate(model, helpers.tokenizer(), env, tasks, max_new_tokens=6,
                             batch_size=1)
    assert [r["completion"] for r in records] == [r["completion"] for r in alone.records]
    separate = gates.perturbation_metrics(model, helpers.tokenizer(), env, tasks[:2],
                                          max_new_tokens=6, batch_size=1)
    assert separate == {k: v for k, v in metrics.items() if k.startswith("eval/perturb/")}
    check = env.check_components[0]
    assert metrics["eval/perturb/original"] == pytest.approx(
        sum(r["components"][check] for r in records[:2]) / 2)
    assert {f"eval/perturb/{n}" for n in env.perturbations(tasks[0])} < set(metrics)
