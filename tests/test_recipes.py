"""Learner recipes as data (envs/domains/, a pack's [recipe.*]): what a run with no flags uses,
what the user's flags keep, and what config.json records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from learner import recipe
from learner.config import Config, parse_config
from learner.recipe_files import RECIPE_KEYS, RecipeError, check_table, read_file, recipe_for

BUILTIN = ["grpo/MathExact-v0", "grpo/CodeTests-v0", "grpo/JsonSchema-v0", "grpo/MathPython-v0"]


@pytest.mark.parametrize("env_id", BUILTIN)
def test_every_builtin_env_has_both_variants_and_they_make_a_valid_config(env_id):
    for variant in ("cpu", "gpu"):
        r = recipe_for(env_id, {}, variant)
        assert r.sources and r.why and {"steps", "prompts_per_step", "group_size",
                                         "max_new_tokens", "learning_rate", "temperature",
                                         "beta"} <= set(r.values)
        cfg = parse_config(["--env", env_id, "--env-recipe", variant])
        for key, value in r.values.items():
            assert getattr(cfg, key) == value
        assert cfg.env_kwargs == r.env_kwargs


def test_the_design_card_command_on_cpu_trains_the_recipe_and_keeps_the_envs_default_pack():
    import gymnasium as gym

    import envs  # noqa: F401

    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "cpu"])
    assert cfg.env_kwargs == {"pack": "pyfunc"}  # the whole pack: no level picked
    assert (cfg.steps, cfg.prompts_per_step, cfg.max_new_tokens) == (30, 4, 96)
    record = cfg.env_recipe_record
    assert record["variant"] == "cpu" and "HumanEval" in record["why"][0]
    # The env's own default stays the real benchmark: only the learner's CPU run picks another.
    assert gym.make("grpo/CodeTests-v0").unwrapped.pack.name == "humaneval"
    math = parse_config(["--env", "grpo/MathExact-v0", "--env-recipe", "cpu"])
    assert math.env_kwargs["pack"] == "arith" and "GSM8K" in math.env_recipe_record["why"][0]
    assert gym.make("grpo/MathExact-v0").unwrapped.pack.name == "gsm8k"


def test_explicit_flags_and_config_keys_win_and_are_recorded(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text("group_size = 4\n")
    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "cpu", "--config",
                        str(toml), "--steps", "3", "--learning-rate", "1e-4"])
    assert (cfg.steps, cfg.group_size, cfg.learning_rate) == (3, 4, 1e-4)
    assert cfg.max_new_tokens == 96  # left to the recipe
    assert cfg.env_recipe_record["overridden"] == ["group_size", "learning_rate", "steps"]
    applied = cfg.env_recipe_record["applied"]
    assert "steps" not in applied and applied["max_new_tokens"] == 96
    assert json.loads(json.dumps(cfg.to_dict()))["env_recipe_record"]["variant"] == "cpu"


def test_a_users_pack_keeps_its_options_and_gets_its_packs_recipe():
    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "gpu",
                        "--env-kwargs", '{"pack": "mbpp"}'])
    assert cfg.env_kwargs == {"pack": "mbpp"}  # the recipe's pyfunc level 1 is not added
    assert cfg.max_new_tokens == 384 and "pack mbpp [recipe.gpu]" in cfg.env_recipe_record["sources"]
    # Without a pack, the user's other keywords join the recipe's pack.
    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "cpu",
                        "--env-kwargs", '{"per_test_s": 5}'])
    assert cfg.env_kwargs == {"pack": "pyfunc", "per_test_s": 5}


def test_the_code_cpu_recipe_draws_the_whole_pack_by_curriculum_and_evaluates_every_level():
    import gymnasium as gym

    import envs  # noqa: F401
    from learner.evaluation.heldout import heldout_tasks

    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "cpu"])
    assert cfg.sampler == "curriculum" and cfg.env_recipe_record["applied"]["sampler"] == "curriculum"
    assert "pack pyfunc [recipe.cpu]" in cfg.env_recipe_record["sources"]
    # The held-out set the run evaluates holds every level the run trains on.
    env = gym.make(cfg.env, **cfg.env_kwargs).unwrapped
    held_out = heldout_tasks(env, cfg.eval_size)
    assert {env.curriculum_key(t) for t in held_out} == set(env.curriculum_keys())
    assert len(env.curriculum_keys()) == 6
    # A flag wins over the recipe's sampler, and config.json says the user kept it.
    for sampler in ("sequential", "uniform"):
        cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "cpu",
                            "--sampler", sampler])
        assert cfg.sampler == sampler and "sampler" in cfg.env_recipe_record["overridden"]
        assert "sampler" not in cfg.env_recipe_record["applied"]
    # A sampler the learner has not is refused where the recipe is read.
    with pytest.raises(RecipeError, match="sampler"):
        check_table({"sampler": 3}, "x.toml [cpu]", env_kwargs=True)


def test_off_and_envs_without_a_recipe_keep_the_learners_defaults():
    defaults = Config()
    cfg = parse_config(["--env", "grpo/CodeTests-v0", "--env-recipe", "off"])
    assert cfg.env_recipe_record is None and cfg.steps == defaults.steps and cfg.env_kwargs == {}
    cfg = parse_config(["--env", "grpo/NoSuchEnv-v0"])  # make_env reports the id, not this
    assert cfg.env_recipe_record is None


def test_auto_picks_gpu_only_where_a_cuda_device_is_visible(monkeypatch):
    monkeypatch.setattr(recipe, "cuda_visible", lambda: True)
    assert recipe.variant_for("auto") == "gpu"
    monkeypatch.setattr(recipe, "cuda_visible", lambda: False)
    assert recipe.variant_for("auto") == "cpu"
    assert recipe.variant_for("off") is None and recipe.variant_for("gpu") == "gpu"
    monkeypatch.undo()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not recipe.cuda_visible()


def test_a_malformed_recipe_is_one_line_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[cpu]\nsteps = 'ten'\nmax_new_token = 3\n[tpu]\n")
    with pytest.raises(RecipeError, match="unknown tables"):
        read_file(bad)
    bad.write_text("[cpu]\nsteps = 'ten'\nmax_new_token = 3\nbeta = true\n")
    with pytest.raises(RecipeError) as err:
        read_file(bad)
    text = str(err.value)
    assert "\n" not in text and str(bad) in text
    assert "'steps' has the wrong type" in text and "unknown key 'max_new_token'" in text
    assert "'beta' has the wrong type" in text  # a bool is not a number
    with pytest.raises(RecipeError, match="env_kwargs"):
        check_table({"env_kwargs": {}}, "pack x", env_kwargs=False)  # a pack names no pack
    assert set(RECIPE_KEYS) <= {f for f in Config.__dataclass_fields__}


def test_the_recipe_is_read_before_torch_loads():
    code = ("import sys\nfrom learner.config import parse_config\n"
            "c = parse_config(['--env', 'grpo/CodeTests-v0', '--env-recipe', 'cpu'])\n"
            "print(c.steps, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1]).stdout.split()
    assert out == ["30", "False"]


def test_the_pack_validator_reports_a_bad_pack_recipe():
    from envs.tools.validate import recipe_problems

    assert recipe_problems({"gpu": {"max_new_tokens": 384}}) == []
    problems = recipe_problems({"gpu": {"max_new_tokens": "long"}, "tpu": {}})
    assert len(problems) == 2 and "'max_new_tokens' has the wrong type" in problems[0]
    assert "unknown recipe variant 'tpu'" in problems[1]


def test_the_recipe_schema_loads_without_the_learner_extra():
    """``python -m envs validate`` (a core-install command) checks pack recipes against the
    learner's schema: with torch absent that import still works."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from envs.tools.validate import validate_folder\n"
            "from learner.recipe_files import RECIPE_KEYS\n"
            "print('steps' in RECIPE_KEYS)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
