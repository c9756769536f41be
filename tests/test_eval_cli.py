"""``python -m learner.eval`` end to end on a tiny model: a training run's checkpoint against the
model it started from, then ``--compare``."""

from __future__ import annotations

import json

import pytest
import torch
from accelerate import Accelerator

from learner.eval import main
from learner.evaluation.run_dir import load_run_policy, run_env
from learner.model import load_model, load_tokenizer, tiny_model
from learner.training import checkpoint


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A training run as the trainer leaves it: config.json and an accelerate checkpoint."""
    root = tmp_path_factory.mktemp("eval_cli")
    start = root / "start-model"
    model = tiny_model()
    model.save_pretrained(start)
    load_tokenizer().save_pretrained(start)
    run = root / "run"
    run.mkdir()
    config = {"env": "grpo/MathExact-v0", "env_kwargs": {"pack": "arith", "level": 1},
              "model": str(start), "lora_r": 0}
    (run / "config.json").write_text(json.dumps(config))
    with torch.no_grad():  # "training": a recognisable change to the weights
        model.lm_head.weight.add_(0.5)
    accelerator = Accelerator(cpu=True)
    accelerator.prepare(model)  # what save_state writes is what the trainer prepared
    checkpoint.save(accelerator, run, 3, {"position": 0}, keep=2)
    return run


def test_latest_checkpoint_is_loaded(run_dir):
    policy, where = load_run_policy(run_dir)
    assert where.endswith("step-0000003")
    start = load_model(json.loads((run_dir / "config.json").read_text())["model"])
    assert torch.allclose(policy.lm_head.weight, start.lm_head.weight + 0.5)


def test_cli_run_report_and_compare(run_dir, tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["--run", str(run_dir), "--limit", "3", "--group-size", "2",
                 "--max-new-tokens", "6", "--general-limit", "3", "--output-dir", str(out)])
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    # The headline says how many samples failed for infrastructure, beside the accuracy.
    printed = capsys.readouterr().out.splitlines()
    assert (f"held-out accuracy {report['accuracy']['greedy']:.1%} on 3 tasks "
            "(0 infrastructure failures)") in printed
    assert (f"starting model: held-out accuracy {report['baseline']['accuracy']['greedy']:.1%} "
            "on 3 tasks (0 infrastructure failures)") in printed
    assert report["accuracy"]["infra_errors"] == 0 and report["accuracy"]["refused"] is None
    for section in ("metadata", "accuracy", "pass_at_k", "reward_distribution",
                    "group_variance", "perturbations", "flagged", "general", "timing",
                    "baseline", "deltas"):
        assert section in report, section
    meta = report["metadata"]
    assert meta["env"] == "grpo/MathExact-v0" and meta["pack"] == "arith"
    assert meta["model"].endswith("step-0000003") and meta["start_model"].endswith("start-model")
    assert meta["pack_version"].startswith("1.1.0+") and meta["seed"] == 0
    assert "CC-BY-SA-4.0" in meta["general_benchmark"]["license"]
    assert report["baseline"]["model"] == meta["start_model"]
    assert report["baseline"]["accuracy"]["n"] == 3
    assert "accuracy (greedy)" in report["deltas"]
    assert (out / "report.html").is_file() and (out / "plots" / "perturbations.png").is_file()
    samples = (out / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 3 * 2 + 3
    assert (out / "samples_start.jsonl").is_file()

    capsys.readouterr()
    assert main(["--compare", str(out), str(out)]) == 0
    table = capsys.readouterr().out
    assert "accuracy (greedy)" in table and "perturb/numbers_in_words" in table


def test_cli_reports_bad_input(tmp_path, capsys):
    assert main(["--env", "grpo/NoSuch-v0", "--output-dir", str(tmp_path)]) == 1
    assert "unknown env id" in capsys.readouterr().err
    assert main(["--run", str(tmp_path), "--output-dir", str(tmp_path)]) == 1
    assert "no config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--model", "x", "--run", "y"])


def test_run_env_takes_the_runs_env_and_says_when_flags_depart_from_it():
    config = {"env": "grpo/MathExact-v0",
              "env_kwargs": {"pack": "arith", "level": 1, "require_boxed": True}}
    # The README's own command: --env given, same as the run's: the run's kwargs are kept.
    env, kwargs, notes = run_env(config, "grpo/MathExact-v0", {})
    assert (env, kwargs, notes) == ("grpo/MathExact-v0", config["env_kwargs"], [])
    assert run_env(config, None, {}) == ("grpo/MathExact-v0", config["env_kwargs"], [])
    env, kwargs, notes = run_env(config, None, {"level": 2})
    assert kwargs == {"pack": "arith", "level": 2, "require_boxed": True}
    assert len(notes) == 1 and '"level": 2' in notes[0]
    env, kwargs, notes = run_env(config, "grpo/JsonSchema-v0", {"pack": "extract"})
    assert (env, kwargs) == ("grpo/JsonSchema-v0", {"pack": "extract"})
    assert "not the env the run trained on" in notes[0]


def test_compare_with_a_missing_report_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["--compare", str(tmp_path / "empty"), str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and str(tmp_path / "empty") in err[0]
    assert "learner.eval" in err[0]  # says how to make one
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "report.json").write_text('{"accuracy": ')
    assert main(["--compare", str(tmp_path / "torn"), str(tmp_path / "torn")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a readable report" in err[0], err


def test_help_and_flag_errors_answer_before_torch_loads_as_learner_run_does():
    """learner.eval's --help, flag errors and --compare, like learner.run's --help and flag
    errors, come before torch is imported, and an error is one line (and a pointer to --help),
    not the usage first."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; from learner import eval as e\n"
            "for argv in (['--limit', 'x'], ['--temperature', '0'], ['--bogus'], ['--help']):\n"
            "    try:\n        e.main(argv)\n"
            "    except SystemExit as exc:\n        print('exit', exc.code, file=sys.stderr)\n"
            "print('compare', e.main(['--compare', 'nowhere', 'nowhere']))\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "False False", done.stdout + done.stderr
    assert "usage:" in done.stdout  # --help still prints every flag
    err = done.stderr.splitlines()
    assert err[0] == "python -m learner.eval: error: argument --limit: must be a whole number " \
        ">= 0, got 'x'", err
    assert err[1].startswith("(see 'python -m learner.eval --help'") and err[2] == "exit 2"
    assert "--temperature must be > 0" in err[3] and err[5] == "exit 2", err
    assert "unrecognized arguments: --bogus" in err[6] and err[8] == "exit 2", err
    assert err[9] == "exit 0" and not any(line.startswith("usage:") for line in err), err
    assert err[10].startswith("error: no report at nowhere") and len(err) == 11, err
    assert "compare 1" in done.stdout  # --compare, too, answers without torch
