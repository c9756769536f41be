"""grpo/* envs inside the trainers people already use: TRL's GRPOTrainer and verl's reward hook."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pyarrow.parquet as pq
import pytest

from envs.tools.integrations import trl as grpo_trl
from envs.tools.integrations import verl as grpo_verl
from tests import learner_helpers as h

ENV = "grpo/MathExact-v0"
ARITH = {"pack": "arith", "level": 1}
# A test env whose grading "fails" (sandbox_error) for completions holding the marker.
gym.register("test/FailingShort-v0", entry_point=h.ShortEnv, kwargs={"fail_marker": "SANDBOX DOWN"})


def test_dataset_has_chat_prompts_and_task_ids():
    data = grpo_trl.dataset(ENV, split="test", size=5, **ARITH)
    assert len(data) == 5 and set(data.column_names) == {"prompt", "task_id"}
    env = gym.make(ENV, split="test", **ARITH).unwrapped
    first = env.pack.task_at("test", 0)
    assert data[0]["task_id"] == first.id
    assert data[0]["prompt"] == [{"role": "user", "content": env.prompt(first)}]
    with pytest.raises(ValueError, match="unbounded"):
        grpo_trl.dataset(ENV, split="train", **ARITH)


def test_reward_func_grades_through_the_env_and_logs_components():
    reward = grpo_trl.reward_func(ENV, require_boxed=True, **ARITH)
    env = gym.make(ENV, **ARITH).unwrapped
    task = env.pack.task_at("test", 0)
    a, b = task["expression"].split(" + ")
    logged = {}
    completions = [[{"role": "assistant", "content": rf"\boxed{{{task['answer']}}}"}],
                   rf"\boxed{{{a} + {b}}}", f"The answer is {task['answer']}"]
    got = reward(prompts=["p"] * 3, completions=completions, task_id=[task.id] * 3,
                 log_metric=lambda k, v: logged.__setitem__(k, v))
    assert got == [pytest.approx(1.1), pytest.approx(0.1), 0.0]  # boxed sum; restated; unboxed
    assert logged == {"MathExact-v0/correct": pytest.approx(1 / 3),
                      "MathExact-v0/format": pytest.approx(2 / 3)}
    assert reward.__name__ == "MathExact-v0"


def test_infrastructure_failures_are_none_not_zero():
    reward = grpo_trl.reward_func("test/FailingShort-v0")
    env = gym.make("test/FailingShort-v0").unwrapped
    tid = env.pack.task_at("test", 0).id
    got = reward(completions=["ok", "SANDBOX DOWN"], task_id=[tid, tid])
    assert got[0] is not None and got[1] is None


def test_one_real_trl_step_with_a_grpo_reward(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from learner.model import load_model, load_tokenizer

    warnings.filterwarnings("ignore")
    config = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=12, learning_rate=1e-5, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True, seed=0)
    trainer = GRPOTrainer(
        model=load_model(), processing_class=load_tokenizer(),  # from_pretrained, as users do
        reward_funcs=[grpo_trl.reward_func(ENV, **ARITH)],
        train_dataset=grpo_trl.dataset(ENV, split="test", size=8, **ARITH), args=config)
    trainer.train()
    logs = {k: v for row in trainer.state.log_history for k, v in row.items()}
    assert trainer.state.global_step == 1
    assert "rewards/MathExact-v0/mean" in logs
    assert "MathExact-v0/correct" in logs and "MathExact-v0/format" in logs


def test_verl_rows_parquet_and_compute_score(tmp_path):
    path = grpo_verl.write_parquet(ENV, tmp_path / "arith.parquet", split="test", size=4, **ARITH)
    table = pq.read_table(path).to_pylist()
    assert len(table) == 4
    row = table[0]
    assert row["data_source"] == ENV and row["ability"] == "arith"
    assert row["prompt"][0]["role"] == "user" and "\\boxed" in row["prompt"][0]["content"]
    extra = row["extra_info"]
    assert json.loads(extra["env_kwargs"]) == ARITH
    gold = row["reward_model"]["ground_truth"]
    right = grpo_verl.compute_score(row["data_source"], gold, gold, extra)
    assert right["score"] == pytest.approx(1.1) and right["correct"] == 1.0
    wrong = grpo_verl.compute_score(row["data_source"], r"\boxed{-1}", gold, extra)
    assert wrong["score"] == pytest.approx(0.1) and wrong["reason"] == "not_equal"
    with pytest.raises(ValueError, match="task_id"):
        grpo_verl.compute_score(ENV, "x", gold, {})


def test_verl_reports_infrastructure_failures():
    extra = {"env_id": "test/FailingShort-v0", "env_kwargs": "{}", "task_id": ""}
    env = gym.make("test/FailingShort-v0").unwrapped
    extra["task_id"] = env.pack.task_at("test", 0).id
    assert grpo_verl.compute_score("x", "ok", "", extra)["score"] > 0
    with pytest.raises(RuntimeError, match="sandbox error"):
        grpo_verl.compute_score("x", "SANDBOX DOWN", "", extra)


def test_the_documented_import_paths_are_the_moved_modules():
    """docs/integrations.md and docs/openenv.md show envs.integrations.*: the same modules
    as envs/tools/integrations/ (one module object, so a patch on either is seen by both)."""
    from envs.integrations import trl, verl
    from envs.integrations import trl_openenv as shown
    from envs.tools.integrations import trl_openenv

    assert trl is grpo_trl and verl is grpo_verl and shown is trl_openenv
    assert callable(verl.compute_score) and callable(trl.reward_func)


def test_verl_loads_the_documented_file_by_path():
    """verl's custom_reward_function.path=envs/integrations/verl.py loads the file by path and
    takes compute_score from it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "envs" / "integrations" / "verl.py"
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score is grpo_verl.compute_score
