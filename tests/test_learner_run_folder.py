"""A run's folder: a folder that holds another run is refused (before anything loads) unless
``--resume`` or ``--overwrite`` says what to do with it, ``--overwrite`` leaves nothing of the
earlier run, and ``config.json`` records what else decides a run's numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from learner import plot, run, run_layout
from learner.config import parse_config
from learner.provenance import git_state
from learner.training.output_dir import RUN_FILES
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parents[1]


def earlier_run(out: Path) -> None:
    """What a longer earlier run leaves: a later checkpoint, its model, logs and plots."""
    step = out / "checkpoints" / "step-0000040"
    step.mkdir(parents=True)
    (step / run_layout.STATE_FILE).write_text(json.dumps({"step": 40, "position": 0}))
    (out / "final").mkdir()
    (out / "final" / "config.json").write_text("{}")
    (out / "config.json").write_text(json.dumps({"env": "grpo/MathExact-v0", "steps": 40}))
    (out / "metrics.jsonl").write_text(json.dumps({"step": 40, "reward/mean": 0.9}) + "\n")
    (out / "samples.jsonl").write_text(json.dumps({"step": 40, "prompt": "old"}) + "\n")
    (out / "plots").mkdir()
    (out / "plots" / "reward.png").write_bytes(b"old")
    (out / "tensorboard").mkdir()
    (out / "tensorboard" / "events.old").write_bytes(b"old")


def test_a_folder_holding_a_run_is_refused_in_one_line_before_torch_loads(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    earlier_run(out)
    # A model that does not exist: were the folder not refused first, the run would fail on
    # it (in a second) rather than train.
    missing = str(tmp_path / "no-such-model")
    code = ("import sys; from learner import run\n"
            f"rc = run.main(['--output-dir', {str(out)!r}, '--model', {missing!r}])\n"
            "print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.stdout.split() == ["1", "False"], done.stdout + done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"error: --output-dir {out} already holds a run (checkpoints/")
    assert err[0].endswith("pass --resume to continue it or --overwrite to replace it")
    assert run_layout.latest(out).name == "step-0000040"  # nothing was touched


def test_a_folder_holding_other_files_is_refused_too(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert run.main(["--output-dir", str(tmp_path), "--model", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not empty (notes.txt)" in err[0] and "--overwrite" in err[0]
    with pytest.raises(SystemExit):
        parse_config(["--resume", "--overwrite"])
    assert "give one" in capsys.readouterr().err


def test_overwrite_leaves_nothing_of_the_earlier_run_and_config_records_provenance(tmp_path,
                                                                                capsys):
    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    out.mkdir()
    earlier_run(out)
    (out / "notes.txt").write_text("not the run's: kept")
    flags = ["--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
             "--steps", "1", "--prompts-per-step", "2", "--group-size", "2",
             "--max-new-tokens", "4", "--no-eval", "--no-progress", "--num-threads", "1",
             "--samples-every", "1", "--overwrite", "--keep-final-checkpoint"]
    assert run.main(flags) == 0
    assert "--overwrite: removed the earlier run's config.json" in capsys.readouterr().out
    # The new run's checkpoint is the latest (the earlier step-40 one once outranked it, and
    # learner.eval --run graded the old model), and no old file is mixed in.
    assert os.listdir(out / "checkpoints") == ["step-0000001"]
    assert run_layout.latest(out).name == "step-0000001"
    assert (out / "final" / "model.safetensors").is_file()
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").open()] == [1]
    assert all(json.loads(line)["step"] == 1 for line in (out / "samples.jsonl").open())
    # The run drew its own plots at the end: none is the earlier run's
    assert (out / "plots" / "reward.png").read_bytes() != b"old"
    assert not (out / "tensorboard" / "events.old").exists()
    assert (out / "notes.txt").read_text() == "not the run's: kept"
    # Every file a run and its plots leave is one --overwrite knows to remove.
    plot.plot(out)
    assert set(os.listdir(out)) - {"notes.txt"} <= set(RUN_FILES)

    record = json.loads((out / "config.json").read_text())
    assert record["steps"] == 1 and record["overwrite"] is True
    prov = record["provenance"]
    assert prov["cpu_threads"] == 1 and prov["processes"] == 1 and prov["device"] == "cpu"
    assert prov["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert {"grpo-gym", "transformers", "accelerate", "peft"} <= set(prov["versions"])
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:  # a git checkout of the project
        assert prov["git"]["commit"] == head.stdout.strip()
        assert isinstance(prov["git"]["dirty"], bool)
    else:
        assert "git" not in prov


def test_git_state_is_none_outside_a_checkout_of_the_project(tmp_path):
    assert git_state(tmp_path) is None  # not a repository
    repo = tmp_path / "other-project"
    (repo / "vendored" / "grpo-gym").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    # A copy inside another project's repository: that commit says nothing about this code.
    assert git_state(repo / "vendored" / "grpo-gym") is None
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    state = git_state(repo)
    assert len(state["commit"]) == 40 and state["dirty"] is False
    (repo / "a.txt").write_text("2")
    (repo / "untracked.txt").write_text("a run folder, say")
    assert git_state(repo)["dirty"] is True


def test_the_demo_starts_afresh_and_says_so_unless_asked_to_resume(tmp_path, monkeypatch,
                                                                   capsys):
    from learner import demo

    seen = []
    monkeypatch.setattr(demo, "train_and_show", lambda config: seen.append(config) or 1)
    out = tmp_path / "demo"
    assert demo.main(["--output-dir", str(out)]) == 1
    assert seen[-1].overwrite and not seen[-1].resume
    assert "starts afresh" not in capsys.readouterr().out  # nothing there to replace
    out.mkdir()
    earlier_run(out)
    demo.main(["--output-dir", str(out), "--steps", "40"])  # again, with more steps
    assert seen[-1].overwrite and seen[-1].steps == 40
    assert f"the earlier run in {out} is replaced" in capsys.readouterr().out
    demo.main(["--output-dir", str(out), "--resume", "--steps", "40"])
    assert seen[-1].resume and not seen[-1].overwrite
