"""``kill -9`` in the middle of ``python -m learner.run``, then ``--resume``: the finished run's
metrics are those of a run that was never interrupted."""

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from learner.training.run_log import read_metrics
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["reward/mean", "loss", "kl", "entropy", "grad_norm", "completion/len_mean", "lr"]


def cli(tiny: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.learner_helpers", "cli", "--env", h.SHORT_ENV_ID,
            "--model", str(tiny), "--output-dir", str(out), "--steps", "8",
            "--prompts-per-step", "2", "--group-size", "4", "--max-new-tokens", "8",
            "--learning-rate", "1e-3", "--lr-scheduler", "cosine", "--warmup-steps", "2",
            "--save-every", "2", "--samples-every", "1", "--no-eval", "--no-progress",
            "--num-threads", "1", *extra]


def test_kill_9_then_resume_matches_an_uninterrupted_run(tmp_path):
    tiny = h.save_tiny(tmp_path / "tiny")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # The uninterrupted run and the one to kill are independent single-threaded processes:
    # they run side by side (the CI machine has two cores).
    full = subprocess.Popen(cli(tiny, tmp_path / "full"), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        part = tmp_path / "part"
        proc = subprocess.Popen(cli(tiny, part), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while not (part / "checkpoints/step-0000002").is_dir() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL  # killed mid-run, not finished
        assert not (part / "final").exists()
        logged = read_metrics(part)
        assert 2 <= logged[-1]["step"] < 8
        _, full_err = full.communicate(timeout=600)
    finally:
        if full.poll() is None:
            full.kill()
    assert full.returncode == 0, full_err[-2000:]
    want = read_metrics(tmp_path / "full")

    resumed = subprocess.run(cli(tiny, part, "--resume"), cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    got = read_metrics(part)
    assert [r["step"] for r in got] == [r["step"] for r in want] == list(range(1, 9))
    for a, b in zip(want, got, strict=True):
        for key in KEYS:
            assert math.isclose(a[key], b[key], rel_tol=1e-5, abs_tol=1e-7), (a["step"], key)
    assert want[-1]["kl"] > 0  # the policy did train
    steps = [int(line.split('"step": ')[1].split(",")[0])
             for line in (part / "samples.jsonl").read_text().splitlines()]
    assert sorted(set(steps)) == list(range(1, 9))  # samples neither lost nor doubled
    assert len(steps) == 8 * 2
