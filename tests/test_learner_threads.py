"""One seed, one result, on any load: the CPU thread count is fixed at start (``--num-threads``,
by default the cores / processes whatever the load), recorded in config.json, and never changed
mid-run; the ETA is the median of the steps so far."""

import json
import os
import subprocess
import sys
from pathlib import Path

from learner.training import distributed
from learner.training.run_notes import eta_left
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parents[1]
#: Figures of a step that are wall time or memory, not the run's numbers.
MACHINE_KEYS = ("time/", "tokens_per_s", "memory/")


def cores() -> int:
    return len(os.sched_getaffinity(0))


def spinners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def test_the_default_thread_count_ignores_the_load():
    quiet = [distributed.cpu_threads(1), distributed.cpu_threads(2)]
    busy = spinners(cores())
    try:
        loaded = [distributed.cpu_threads(1), distributed.cpu_threads(2)]
    finally:
        stop(busy)
    assert quiet == loaded == [cores(), max(1, cores() // 2)]


def run_twice_one_beside_a_busy_loop(tmp_path: Path) -> list[Path]:
    """The same seed and flags twice through the CLI (a model loaded with from_pretrained, no
    --num-threads), the second with a busy loop beside it (the old default took 1 thread of 2)."""
    tiny = h.save_tiny(tmp_path / "tiny")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outs = []
    for i, load in enumerate((0, 1)):
        out = tmp_path / f"run{i}"
        busy = spinners(load)
        try:
            run = subprocess.run(
                [sys.executable, "-m", "tests.learner_helpers", "cli", "--env", h.SHORT_ENV_ID,
                 "--model", str(tiny), "--output-dir", str(out), "--seed", "3", "--steps", "2",
                 "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "4",
                 "--no-eval", "--no-progress", "--samples-every", "1"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        finally:
            stop(busy)
        assert run.returncode == 0, run.stderr[-3000:]
        outs.append(out)
    return outs


def test_one_seed_gives_one_result_with_other_cpu_work_beside_it(tmp_path):
    quiet, loaded = run_twice_one_beside_a_busy_loop(tmp_path)
    configs = [json.loads((o / "config.json").read_text()) for o in (quiet, loaded)]
    # The count is the machine's, not the load's, and config.json says what it was.
    assert [c["num_threads"] for c in configs] == [cores(), cores()]
    assert [c["provenance"]["cpu_threads"] for c in configs] == [cores(), cores()]
    metrics = []
    for out in (quiet, loaded):
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        metrics.append([{k: v for k, v in r.items() if not k.startswith(MACHINE_KEYS)}
                        for r in rows])
    assert [r["step"] for r in metrics[0]] == [1, 2]
    assert metrics[0] == metrics[1]
    samples = [(o / "samples.jsonl").read_text() for o in (quiet, loaded)]
    assert samples[0] and samples[0] == samples[1]


def test_the_eta_is_the_median_of_the_steps_so_far():
    assert eta_left([], 5) == "-"
    assert eta_left([10.0], 3) == "30 s"
    # One step slowed 15x by a neighbour moves the median not at all: 10 s x 8 left.
    assert eta_left([10.0, 150.0, 10.0], 8) == "80 s"
    assert eta_left([60.0, 60.0, 300.0, 60.0], 30) == "30 min"
