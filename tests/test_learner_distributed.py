"""Two CPU processes (gloo) under ``accelerate launch``: one step, replicas stay identical."""

import os
import subprocess
import sys


def test_two_process_step_keeps_replicas_identical(tmp_path):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "-m", "tests.learner_helpers", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [(tmp_path / f"replica-{r}.txt").read_text().split() for r in (0, 1)]
    (init0, final0, world0, pos0), (init1, final1, world1, pos1) = lines
    assert world0 == world1 == "2"
    assert init0 == init1 and final0 == final1  # identical replicas after the update
    assert final0 != init0  # ... and the update did change them
    assert pos0 == pos1 == "4"  # both walked the same prompt stream
