"""The main command shows what it rewarded, as the demo does: at the end a few credited samples
and held-out answers, ``plots/`` (and every ``--plot-every`` steps on the way), and a
``samples.jsonl`` that holds every step's groups, thinned to one in 4 past its disk bound."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym

from learner import run
from learner.training.plots import BackgroundPlots
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parents[1]


def test_learner_run_prints_what_it_rewarded_and_writes_plots_and_every_group(tmp_path, capsys):
    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    # No sample flags: the defaults are what a user gets.
    assert run.main(["--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
                     "--steps", "3", "--prompts-per-step", "2", "--group-size", "4",
                     "--max-new-tokens", "6", "--eval-size", "2", "--no-eval-perturbations",
                     "--no-progress", "--num-threads", "1", "--learning-rate", "1e-3",
                     "--plot-every", "2"]) == 0
    printed = capsys.readouterr().out
    assert ("what the reward credited (latest samples):" in printed
            or "no credited completion in the saved samples" in printed)
    assert "held-out answers (greedy, after training):" in printed
    assert f"plots: {out / 'plots'}/" in printed and (out / "plots" / "reward.png").is_file()
    groups = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    # Every step's every group (P = 2), each with its G = 4 completions.
    assert [g["step"] for g in groups] == [1, 1, 2, 2, 3, 3]
    assert all(len(g["completions"]) == 4 for g in groups)
    # ShortEnv pays short answers: some of the 24 completions were credited, and shown.
    if any(any(g["passed"]) for g in groups):
        assert "what the reward credited (latest samples):" in printed


def test_past_the_disk_bound_one_group_in_four_is_written(tmp_path, capsys):
    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    assert run.main(["--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
                     "--steps", "2", "--prompts-per-step", "8", "--group-size", "2",
                     "--max-new-tokens", "4", "--no-eval", "--no-progress", "--num-threads", "1",
                     "--samples-max-mb", "0.000001", "--plot-every", "0"]) == 0
    assert "one group in 4 of each step is written" in capsys.readouterr().out
    steps = [json.loads(line)["step"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert steps == [1] * 8 + [2] * 2  # step 1 whole (the file was empty), then 8 / 4


def test_background_plots_draw_the_curves_so_far_one_at_a_time(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "reward/mean": s / 10, "kl": 0.0}) + "\n" for s in (1, 2, 3)))
    plots = BackgroundPlots(tmp_path)
    assert plots.start() is True
    assert plots.start() is False  # the first is still drawing (matplotlib takes a second)
    plots.close()
    assert (tmp_path / "plots" / "reward.png").is_file()
    assert subprocess.run([sys.executable, "-m", "learner.plot", "--help"], cwd=ROOT,
                          capture_output=True).returncode == 0
