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
    for section in ("metadata", "accuracy", "pass_at_k", "reward_distribution",
                    "group_variance", "perturbations", "flagged", "general", "timing",
                    "baseline", "deltas"):
        assert section in report, section
    meta = report["metadata"]
    assert meta["env"] == "grpo/MathExact-v0" and meta["pack"] == "arith"
    assert meta["model"].endswith("step-0000003") and meta["start_model"].endswith("start-model")
    assert meta["pack_version"].startswith("1.0.0+") and meta["seed"] == 0
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
