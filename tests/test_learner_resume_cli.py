"""``kill -9`` in the middle of ``python -m learner.run``, then ``--resume``: the finished run's
metrics are those of a run that was never interrupted."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from learner.run_layout import STATE_FILE
from learner.training.run_log import read_metrics
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["reward/mean", "loss", "kl", "entropy", "grad_norm", "completion/len_mean", "lr"]


def cli(tiny: Path, out: Path, *extra: str, steps: int = 8) -> list[str]:
    return [sys.executable, "-m", "tests.learner_helpers", "cli", "--env", h.SHORT_ENV_ID,
            "--model", str(tiny), "--output-dir", str(out), "--steps", str(steps),
            "--prompts-per-step", "2", "--group-size", "4", "--max-new-tokens", "8",
            "--learning-rate", "1e-3", "--lr-scheduler", "cosine", "--warmup-steps", "2",
            "--save-every", "2", "--samples-every", "1", "--no-eval", "--no-progress",
            "--num-threads", "1", *extra]


def run(args: list[str]) -> subprocess.CompletedProcess:
    """``args`` (a ``cli`` command) in one thread, its output captured."""
    return subprocess.run(args, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=600)


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

    resumed = run(cli(tiny, part, "--resume"))
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


def test_a_resume_with_a_new_learning_rate_trains_with_it_and_says_what_changed(tmp_path):
    # The checkpoint's optimizer and schedule held the first learning rate: the new flag was
    # recorded in config.json while the old rate went on training, silently.
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"

    def finished(steps: int, *extra: str) -> subprocess.CompletedProcess:
        done = run(cli(tiny, out, "--lr-scheduler", "constant", "--warmup-steps", "0",
                       "--keep-final-checkpoint", *extra, steps=steps))
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    finished(2)
    again = finished(3, "--resume", "--learning-rate", "5e-3", "--max-grad-norm", "0.5")
    got = read_metrics(out)
    assert [r["step"] for r in got] == [1, 2, 3]
    assert [r["lr"] for r in got] == [1e-3, 1e-3, 5e-3]
    notes = [line for line in again.stdout.splitlines() if line.startswith("note: --resume")]
    assert len(notes) == 1
    assert "learning_rate 0.001 -> 0.005" in notes[0] and "max_grad_norm" in notes[0]
    record = json.loads((out / "config.json").read_text())
    assert record["learning_rate"] == 5e-3
    assert record["resumed_changes"] == [{"checkpoint": "step-0000002", "changed": {
        "learning_rate": [1e-3, 5e-3], "max_grad_norm": [1.0, 0.5]}}]
    # The same flags again: nothing changes, nothing is said, the history stays.
    finished(4, "--resume", "--learning-rate", "5e-3", "--max-grad-norm", "0.5")
    assert json.loads((out / "config.json").read_text())["resumed_changes"] == \
        record["resumed_changes"]
    assert read_metrics(out)[-1]["lr"] == 5e-3


def test_a_resume_with_another_model_or_lora_rank_is_refused_in_one_line_before_it_loads(
        tmp_path):
    # Both ended in a traceback listing the checkpoint's missing names, after config.json
    # had been rewritten with the rank the checkpoint did not have.
    tiny = h.save_tiny(tmp_path / "tiny")
    other = h.save_tiny(tmp_path / "other", seed=1)
    out = tmp_path / "run"
    assert run(cli(tiny, out, "--keep-final-checkpoint", steps=1)).returncode == 0
    record = (out / "config.json").read_bytes()
    for model, extra, says in ((other, (), f"trained with --model {tiny}, which its checkpoint "
                                            f"holds; it cannot continue with --model {other}"),
                               (tiny, ("--lora-r", "4"), "trained with --lora-r 0, which its "
                                                         "checkpoint holds; it cannot continue "
                                                         "with --lora-r 4"),
                               # its sampler's state: a note, then a traceback, and a record of
                               # a change that never ran
                               (tiny, ("--sampler", "curriculum"), "cannot continue with "
                                                                   "--sampler curriculum"),
                               # its schedule's position, in optimizer steps
                               (tiny, ("--num-iterations", "2"), "--num-iterations 2")):
        refused = run(cli(model, out, "--keep-final-checkpoint", "--resume", *extra, steps=2))
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and lines[-1].startswith("error: --resume: the run in")
        assert says in lines[-1] and f"--model {out}/final" in lines[-1]
        assert not any("Traceback" in line for line in lines)
        assert (out / "config.json").read_bytes() == record  # nothing rewritten
    # The same model named another way (relative to the working folder) is the run's.
    same = run(cli(Path(os.path.relpath(tiny, ROOT)), out, "--resume"))
    assert same.returncode == 0, same.stderr[-2000:]
    assert "note: --resume changes" not in same.stdout


def test_a_resume_that_cannot_read_the_runs_record_or_load_its_checkpoint_says_so_in_one_line(
        tmp_path):
    from learner.evaluation import run_dir

    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"

    def resume(model: Path, *extra: str) -> subprocess.CompletedProcess:
        return run(cli(model, out, "--keep-final-checkpoint", "--resume", *extra, steps=2))

    assert run(cli(tiny, out, "--keep-final-checkpoint", steps=1)).returncode == 0
    good = (out / "config.json").read_text()
    for bad in ('{"env": "grpo/Math', "", "[1, 2]"):
        (out / "config.json").write_text(bad)
        refused = resume(tiny)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and lines[-1].startswith(
            f"error: --resume: {out / 'config.json'} is not a run's record"), lines[-3:]
        assert (out / "config.json").read_text() == bad  # left as it was
        with pytest.raises(run_dir.RunDirError, match="is not a run's record"):
            run_dir.run_config(out)  # learner.eval --run's reading of it
    # Without a record to check against, the checkpoint itself refuses another LoRA rank: one
    # line, and nothing written (config.json was rewritten before the checkpoint loaded).
    (out / "config.json").unlink()
    refused = resume(tiny, "--lora-r", "4")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and "trained with --lora-r 0, which its checkpoint holds; " \
        "it cannot continue with --lora-r 4" in lines[-1], lines[-3:]
    assert not (out / "config.json").exists()
    # A checkpoint from before that record: its tensors refuse the rank as they load.
    state = out / "checkpoints" / "step-0000001" / STATE_FILE
    saved = state.read_text()
    state.write_text(json.dumps({k: v for k, v in json.loads(saved).items() if k != "bound"}))
    refused = resume(tiny, "--lora-r", "4")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and "does not match the model" in lines[-1], lines[-3:]
    assert not any("Traceback" in line for line in lines)
    assert not (out / "config.json").exists()
    state.write_text(saved)
    # ... and another model of the same shape, which loads: the checkpoint's record of what it
    # was written under refuses it (it resumed silently, and config.json then named it).
    other = h.save_tiny(tmp_path / "other", seed=1)
    refused = resume(other)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and lines[-1] == (
        f"error: --resume: the run in {out} trained with --model {tiny.resolve()}, which its "
        f"checkpoint holds; it cannot continue with --model {other}: give the run's, or train "
        f"further in a new run from its weights (--model {out}/final --output-dir ANOTHER)")
    assert not (out / "config.json").exists()
    (out / "config.json").write_text(good)
    assert resume(tiny).returncode == 0
