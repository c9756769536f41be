"""The RL core's flags: the importance-sampling default follows the engine, combinations that
leave the papers are refused in one line, --recipe presets set a paper's values together and
explicit flags still win, and old runs' config.json still reads."""

from __future__ import annotations

import json

import pytest

from learner import config as config_module
from learner.config import Config, ConfigError, parse_config


def test_is_correction_is_on_by_default_where_vllm_samples(monkeypatch):
    assert Config(rollout_engine="vllm").is_mode == "sequence_mask"  # TRL's default
    assert Config(rollout_engine="hf").is_mode == "none"
    assert Config(rollout_engine="vllm", is_correction="none").is_mode == "none"
    assert Config(rollout_engine="hf", is_correction="token_mask").is_mode == "token_mask"
    # auto picks vLLM on a CUDA GPU where vLLM is installed: the correction follows it.
    monkeypatch.setattr(config_module, "cuda_visible", lambda: True)
    monkeypatch.setattr(config_module.importlib.util, "find_spec", lambda name: object())
    assert Config().engine_is_vllm and Config().is_mode == "sequence_mask"
    monkeypatch.setattr(config_module, "cuda_visible", lambda: False)
    assert Config().is_mode == "none"


def test_is_cap_min_is_a_flag_and_must_sit_under_the_cap():
    cfg = parse_config(["--env-recipe", "off", "--is-correction", "token_mask",
                        "--is-cap-min", "0.5"])
    assert (cfg.is_mode, cfg.is_cap_min, cfg.is_cap) == ("token_mask", 0.5, 3.0)
    with pytest.raises(ConfigError, match="--is-cap-min must be in"):
        Config(is_cap=2.0, is_cap_min=2.0).validate()


@pytest.mark.parametrize("loss_type", ["dapo", "dr_grpo"])
def test_gspo_with_a_token_level_aggregation_is_refused(loss_type):
    with pytest.raises(ConfigError, match="needs a sequence-level aggregation") as exc:
        Config(importance_sampling_level="sequence", loss_type=loss_type).validate()
    assert "\n" not in str(exc.value)
    Config(importance_sampling_level="sequence", loss_type="grpo").validate()


def test_fewer_prompts_per_step_than_processes_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ConfigError, match="fewer than the 4 processes"):
        Config(prompts_per_step=2, loss_type="dr_grpo").validate()
    Config(prompts_per_step=4, loss_type="dr_grpo").validate()


def test_the_dapo_preset_sets_the_papers_values_together():
    cfg = parse_config(["--env-recipe", "off", "--recipe", "dapo", "--max-new-tokens", "100"])
    assert (cfg.eps_low, cfg.eps_high, cfg.beta, cfg.loss_type) == (0.2, 0.28, 0.0, "dapo")
    assert cfg.dynamic_sampling and cfg.dynamic_sampling_metric == "accuracy"
    assert cfg.overlong_cache == 20  # DAPO's 4096 of 20480: the last 20% of the budget
    record = json.loads(json.dumps(cfg.to_dict()))
    assert record["recipe"] == "dapo" and record["recipe_record"]["applied"]["beta"] == 0.0


def test_explicit_flags_win_over_the_preset_and_the_preset_over_the_env_recipe():
    cfg = parse_config(["--recipe", "dapo", "--beta", "0.01", "--no-dynamic-sampling"])
    assert cfg.beta == 0.01 and not cfg.dynamic_sampling and cfg.eps_high == 0.28
    assert cfg.recipe_record["overridden"] == ["beta", "dynamic_sampling"]
    # The env's cpu recipe sets beta too: the preset's 0 stands over it.
    plain = parse_config(["--recipe", "gspo"])
    assert plain.beta == 0.0 and plain.importance_sampling_level == "sequence"
    assert (plain.eps_low, plain.eps_high) == (3e-4, 4e-4)
    assert "beta" in plain.env_recipe_record["left_to_recipe"]
    dr = parse_config(["--env-recipe", "off", "--recipe", "dr_grpo"])
    assert (dr.loss_type, dr.reward_scaling, dr.beta) == ("dr_grpo", "none", 0.0)


def test_old_runs_config_json_reads_with_the_env_recipe_record():
    old = {**Config().to_dict(), "recipe": {"variant": "cpu", "applied": {}}}
    del old["env_recipe_record"], old["recipe_record"]
    cfg = Config.from_dict(old)
    assert cfg.recipe is None and cfg.env_recipe_record == {"variant": "cpu", "applied": {}}
    now = parse_config(["--recipe", "grpo"])
    assert Config.from_dict(json.loads(json.dumps(now.to_dict()))) == now
