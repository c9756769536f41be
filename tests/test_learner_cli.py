"""The command line: flags, TOML config, clear early failures, plotting."""

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from learner import plot, run
from learner.config import Config, ConfigError, build_parser, parse_config, read_toml

ROOT = Path(__file__).resolve().parents[1]


def test_flags_and_toml_precedence(tmp_path):
    toml = tmp_path / "cfg.toml"
    toml.write_text('group-size = 6\nsteps = 9\nenv_kwargs = {pack = "arith", level = 2}\n')
    cfg = parse_config(["--config", str(toml), "--steps", "3", "--epsilon-high", "0.28",
                        "--loss-type", "dapo", "--no-progress"])
    assert (cfg.group_size, cfg.steps, cfg.eps_high, cfg.loss_type) == (6, 3, 0.28, "dapo")
    assert cfg.env_kwargs == {"pack": "arith", "level": 2}
    assert cfg.progress is False and cfg.eps_low == 0.2


def test_objective_defaults_follow_the_papers(monkeypatch):
    token = parse_config([])
    assert (token.eps_low, token.eps_high, token.reward_scaling) == (0.2, 0.2, "group")
    gspo = parse_config(["--importance-sampling-level", "sequence"])
    assert (gspo.eps_low, gspo.eps_high) == (3e-4, 4e-4)  # GSPO's range, not PPO's
    assert parse_config(["--importance-sampling-level", "sequence", "--epsilon", "1e-3"]).eps_high \
        == 1e-3
    dr = parse_config(["--loss-type", "dr_grpo"])
    assert dr.reward_scaling == "none"  # Dr. GRPO has no std scaling
    assert parse_config(["--loss-type", "dr_grpo", "--scale-rewards", "group"]).reward_scaling \
        == "group"
    # Every flag's help says so; a flag whose default depends on others names it in words.
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside the phrases looked for
    helptext = build_parser().format_help()
    assert "none with --loss-type dr_grpo, as Dr. GRPO has no std scaling" in helptext
    assert "3e-4 at the sequence level, as GSPO)\n" in helptext  # no "(default: None)" after
    with pytest.raises(SystemExit):
        parse_config(["--overlong-cache", "16", "--overlong-max", "8"])


@pytest.mark.parametrize("argv, message", [
    (["--group-size", "1"], "--group-size must be >= 2"),
    (["--scale-rewards", "sometimes"], "invalid choice"),
    (["--env-kwargs", "[1]"], "JSON object"),
    (["--steps", "ten"], "invalid int value"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_flags_fail_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_config(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_unknown_toml_key_suggests_the_right_one(tmp_path):
    toml = tmp_path / "cfg.toml"
    toml.write_text("group_sise = 4\n")
    with pytest.raises(ConfigError, match="did you mean group_size"):
        read_toml(toml)


def test_unknown_env_suggests_close_ids(tmp_path, capsys):
    rc = run.main(["--env", "grpo/MathExcat-v0", "--output-dir", str(tmp_path)])
    assert rc == 1
    assert "Did you mean: grpo/MathExact-v0?" in capsys.readouterr().err
    # Nothing close: no guess, and every known id is listed (a guess once left one out).
    assert run.main(["--env", "grpo/Nope-v0", "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Did you mean" not in err
    for env_id in ("grpo/MathExact-v0", "grpo/CodeTests-v0", "grpo/JsonSchema-v0"):
        assert env_id in err


def test_bad_env_kwargs_fail_early(tmp_path, capsys):
    rc = run.main(["--env-kwargs", '{"pack": "arith", "level": 99}', "--output-dir",
                   str(tmp_path)])
    assert rc == 1
    assert "level" in capsys.readouterr().err


def test_unloadable_model_fails_with_a_clear_message(tmp_path, capsys):
    flags = ["--env-kwargs", '{"pack": "arith", "level": 1}', "--output-dir", str(tmp_path / "o")]
    assert run.main([*flags, "--model", str(tmp_path / "no-such-model")]) == 1
    assert f"model path '{tmp_path / 'no-such-model'}' does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert run.main([*flags, "--model", str(tmp_path / "empty")]) == 1
    assert f"cannot load a tokenizer from '{tmp_path / 'empty'}'" in capsys.readouterr().err
    # A hub id, with no hub reachable: the message says so instead of a repo-id syntax error.
    assert run.main([*flags, "--model", "no-such-org/no-such-model"]) == 1
    err = capsys.readouterr().err
    assert "is not a local folder" in err and "no model hub is reachable" in err


def test_help_and_flag_errors_come_before_heavy_imports():
    # Parsing and checking flags must not import torch: --help and typos answer at once.
    code = ("import sys; from learner.config import parse_config\n"
            "try:\n    parse_config(['--steps', 'ten'])\nexcept SystemExit:\n    pass\n"
            "import learner.run\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "False False", done.stderr
    first = done.stderr.splitlines()[0]
    assert first.endswith("error: argument --steps: invalid int value: 'ten'"), done.stderr


def test_config_round_trips_through_json():
    cfg = Config(steps=5, env_kwargs={"pack": "arith"})
    assert Config(**json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_plot_writes_pngs(tmp_path):
    rows = [{"step": 0, "eval/accuracy": 0.1}]
    rows += [{"step": s, "reward/mean": s / 10, "reward/correct": s / 20, "kl": 0.01 * s,
              "entropy": 1.0, "group/frac_zero_std": 0.5, "completion/len_mean": 30}
             for s in range(1, 4)]
    rows.append({"step": 4, "eval/accuracy": 0.4, "eval/pass@4": 0.6,
                 "eval/perturb/paraphrase": 0.3})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = {p.name for p in plot.plot(tmp_path)}
    assert {"reward.png", "reward_components.png", "kl.png", "entropy.png",
            "zero_std_fraction.png", "completion_length.png", "heldout_accuracy.png",
            "perturbations.png"} <= written
    assert all((tmp_path / "plots" / name).stat().st_size > 1000 for name in written)


def test_plot_survives_a_torn_line_and_draws_skipped_steps_as_gaps(tmp_path):
    rows = [{"step": 1, "kl": 0.01}, {"step": 2, "kl": None, "skipped": True},
            {"step": 3, "kl": 0.03}]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "kl": 0.0'  # killed mid-line
    (tmp_path / "metrics.jsonl").write_text(text)
    assert [r["step"] for r in plot.read_metrics(tmp_path)] == [1, 2, 3]
    steps, values = plot._series(plot.read_metrics(tmp_path), "kl")
    assert steps == [1, 2, 3] and values[0] == 0.01 and math.isnan(values[1])
    assert "kl.png" in {p.name for p in plot.plot(tmp_path)}


def test_unsupported_distributed_modes_are_refused_with_a_message():
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from learner.training.sharding import UnsupportedBackend, check_supported

    def accel(kind, stage=None):
        plugin = SimpleNamespace(zero_stage=stage)
        return SimpleNamespace(distributed_type=kind, state=SimpleNamespace(deepspeed_plugin=plugin))

    with pytest.raises(UnsupportedBackend, match="FSDP is not supported.*ZeRO-3"):
        check_supported(accel(DistributedType.FSDP))
    with pytest.raises(UnsupportedBackend, match="ZeRO-2"):
        check_supported(accel(DistributedType.DEEPSPEED, 3), lora=True)
    check_supported(accel(DistributedType.DEEPSPEED, 2), lora=True)
    check_supported(accel(DistributedType.DEEPSPEED, 3))
    check_supported(accel(DistributedType.MULTI_CPU), lora=True)


def test_a_recipe_preset_is_announced_before_the_model_loads(tmp_path, capsys):
    # launch printed config.recipe, which became the env recipe's record: --recipe crashed there.
    flags = ["--env-kwargs", '{"pack": "arith", "level": 1}', "--output-dir", str(tmp_path / "o"),
             "--recipe", "dapo", "--model", str(tmp_path / "empty")]
    (tmp_path / "empty").mkdir()
    assert run.main(flags) == 1
    out = capsys.readouterr()
    assert "--recipe dapo: " in out.out and "beta=0.0" in out.out
    assert "cannot load a tokenizer" in out.err


def test_the_resume_command_repeats_flags_not_records():
    from learner.resume_command import resume_command

    cfg = parse_config(["--recipe", "dapo", "--steps", "7", "--output-dir", "runs/x"])
    assert cfg.recipe_record and cfg.env_recipe_record is not None
    words = shlex.split(resume_command(cfg))
    assert not [w for w in words if w.endswith("-record")]
    again = parse_config(words[3:])  # after "python -m learner.run"
    assert again.recipe == "dapo" and again.steps == 7 and again.resume
