"""``python -m learner.run`` as a user runs it, for a few steps on the device, and its step
figures read back from the run's ``metrics.jsonl``: generate, score and train seconds, tokens/s."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scripts.gpucheck.synthetic import BRIEF_ENV_ID

# A random-init model earns no reward on a real env (on MathExact every group had no signal and
# each update was skipped: no train time). On the GPU the run's env is ``synthetic.BriefEnv``,
# rewarded for brevity in characters, which every group of a random model spreads over, so every
# step updates and has train figures. The lazy rehearsal keeps MathExact: an update there took
# 100-120 s of wall time a step (the lazy device compiles its graphs), and the rehearsal's
# train path is the update and learn phases' (and tests/test_gpu_check.py's on CPU).
#: The env of the GPU's CLI phase, and the rehearsal's.
GPU_ENV, REHEARSAL_ENV = BRIEF_ENV_ID, "grpo/MathExact-v0"
FIGURES = ("time/step_s", "time/generate_s", "time/score_s", "time/train_s",
           "tokens_per_s/generate", "tokens_per_s/train", "completion/len_mean", "kl", "skipped")


def learner_takes_device() -> bool:
    """Whether this learner has ``--device``; without it a run picks CUDA itself."""
    from learner.config import field_types

    return "device" in field_types()


def command(model: Path, out: Path, device: str, *, steps: int, prompts: int, group: int,
            tokens: int, env: str = GPU_ENV) -> list[str]:
    # learner.run with gpucheck/Brief-v0 registered (scripts/gpucheck/cli_env.py): the arith
    # pack's prompts and token budgets. --env-recipe off: these sizes, not the env's GPU recipe
    # (which is minutes a step).
    cmd = [sys.executable, "-m", "scripts.gpucheck.cli_env", "--env", env,
           "--env-kwargs", json.dumps({"pack": "arith", "level": 1}), "--env-recipe", "off",
           "--model", str(model), "--output-dir", str(out), "--steps", str(steps),
           "--prompts-per-step", str(prompts), "--group-size", str(group),
           "--max-new-tokens", str(tokens), "--no-eval", "--no-progress", "--samples-every", "0",
           "--save-every-minutes", "0", "--overwrite"]
    if learner_takes_device():
        cmd += ["--device", device]
    elif device not in ("cuda", "cpu"):  # where a run goes by itself
        raise RuntimeError(f"the learner has no --device flag yet: a run cannot be placed on "
                           f"{device}")
    return cmd


def run(cmd: list[str], out: Path, limit: float, cwd: Path) -> dict[str, Any]:
    """Run the CLI within ``limit`` seconds; its per-step figures, or the error's last line."""
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the run went over its {limit:.0f} s limit") from None
    wall = round(time.monotonic() - start, 1)
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()
        raise RuntimeError(f"exit {done.returncode}: {lines[-1][-300:] if lines else ''}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    steps = [{k: row.get(k) for k in FIGURES} for row in rows if "time/step_s" in row]
    return {"command": " ".join(cmd[1:]), "wall_s": wall, "steps": steps}
