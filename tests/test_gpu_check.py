"""scripts/gpu_check.py on a machine without a CUDA GPU: green, and it says plainly that it
skipped the CUDA parts; its phases' records and table."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_on_cpu_it_skips_every_cuda_phase_and_says_so(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "scripts/gpu_check.py", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    for phase in ("install", "tests", "steps", "engines"):
        assert f"{phase}: no CUDA GPU visible: skipped" in done.stdout
    record = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [p["status"] for p in record["phases"]] == ["skipped"] * 4
    assert "| tests | skipped |" in (tmp_path / "gpu_check.md").read_text()


def test_a_failing_or_slow_phase_is_recorded_as_failed():
    gpu_check = _module()
    failed = gpu_check.run_phase("x", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
                                 30)
    assert failed["status"] == "failed" and failed["detail"] == "exit 3: boom"
    slow = gpu_check.run_phase("y", [sys.executable, "-c", "import time; time.sleep(30)"], 1)
    assert slow["status"] == "failed" and slow["detail"] == "over its 1 s limit"
    text = gpu_check.table([failed, {"phase": "engines", "status": "ok", "seconds": 1.0,
                                     "detail": "", "figures": {"vllm": {
                                         "step_s": 1.5, "gen_tokens_per_s": 900.0,
                                         "heldout_accuracy": 0.25}}}])
    assert "| x | failed |" in text and "| vllm | 1.50 | 900.0 | 25.0% |" in text
