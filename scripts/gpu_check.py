"""The GPU check, one command: install, the learner's tests on CUDA, a few GRPO steps, and the
sampling engines side by side; one JSON and one markdown table.

    python scripts/gpu_check.py [--out runs/gpu-check] [--no-install] [--model PATH]

On a machine with a CUDA GPU, in this order, each phase in its own process with its own time
limit (the defaults fit in about 10 minutes on one GPU):

1. ``install``: ``scripts/setup.sh test`` (its plan picks the CUDA builds of torch and vLLM on a
   GPU machine), then every later phase runs in the Python that set-up installed into;
2. ``tests``: the learner's test subset (the GRPO math, the forward pass, rollouts, the vLLM
   engine, off-policy and async), which runs on CUDA where it is visible;
3. ``steps``: a few GRPO steps in bf16: generation and training tokens/s, the peak GPU memory
   and the KL of the first step, which must be 0 (reference and policy computed alike);
4. ``engines``: ``benchmarks/rollout_engines.py --sides vllm,hf,trl``: ours with vLLM, ours with
   hf and TRL's GRPOTrainer with vLLM, each in a fresh process on the same model, seed and
   settings: step time, generation tokens/s, the mismatch, held-out accuracy.

Without a CUDA GPU it skips all four, says so in one line each, and exits 0: the JSON and the
table then record what was skipped and why. A failed phase exits 1 (the others still run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the learner is importable from the repo

#: The learner's tests that exercise the GPU path (CUDA where it is visible).
TESTS = ("tests/test_learner_grpo.py", "tests/test_learner_forward.py",
         "tests/test_learner_rollout.py", "tests/test_vllm_engine.py",
         "tests/test_learner_offpolicy.py", "tests/test_learner_async_honesty.py")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="runs/gpu-check", help="where gpu_check.json and .md go")
    p.add_argument("--no-install", action="store_true", help="skip scripts/setup.sh")
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--steps", type=int, default=3, help="GRPO steps of the steps phase")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--engine-steps", type=int, default=10)
    p.add_argument("--eval-size", type=int, default=64)
    p.add_argument("--limits", default="install=240,tests=150,steps=60,engines=240",
                   help="seconds per phase (default: 690 in all, under 10 minutes of work)")
    p.add_argument("--phase", choices=("steps",), help=argparse.SUPPRESS)  # internal
    p.add_argument("--json", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def cuda_visible() -> bool:
    from learner.recipe import cuda_visible as visible  # torch-free: torch may not be installed

    return visible()


def venv_python() -> str:
    """The Python ``scripts/setup.sh`` installs into: $PYTHON, the active venv, else .venv (as
    it chooses), else this one."""
    for candidate in (os.environ.get("PYTHON"),
                      os.environ.get("VIRTUAL_ENV") and f"{os.environ['VIRTUAL_ENV']}/bin/python",
                      str(ROOT / ".venv" / "bin" / "python")):
        if candidate and Path(candidate).is_file():
            return candidate
    return sys.executable


def run_phase(name: str, cmd: list[str], limit: float) -> dict:
    """Run ``cmd`` with a time limit; its record: status, seconds and the output's last line."""
    print(f"{name}: {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"phase": name, "status": "failed", "seconds": round(time.monotonic() - start, 1),
                "detail": f"over its {limit:.0f} s limit"}
    lines = (done.stdout + done.stderr).strip().splitlines()
    last = lines[-1] if lines else ""
    return {"phase": name, "status": "ok" if done.returncode == 0 else "failed",
            "seconds": round(time.monotonic() - start, 1),
            "detail": last[-300:] if done.returncode == 0 else
            f"exit {done.returncode}: {last[-300:]}"}


def phases(args: argparse.Namespace, out: Path) -> list[dict]:
    limits = {k: float(v) for k, v in (item.split("=") for item in args.limits.split(","))}
    if not cuda_visible():
        why = "no CUDA GPU visible: skipped (this check needs one)"
        for name in ("install", "tests", "steps", "engines"):
            print(f"{name}: {why}", flush=True)
        return [{"phase": name, "status": "skipped", "seconds": 0.0, "detail": why}
                for name in ("install", "tests", "steps", "engines")]
    records = []
    if args.no_install:
        records.append({"phase": "install", "status": "skipped", "seconds": 0.0,
                        "detail": "--no-install"})
    else:
        records.append(run_phase("install", ["bash", "scripts/setup.sh", "test"],
                                 limits["install"]))
    python = venv_python()
    records.append(run_phase("tests", [python, "-m", "pytest", "-q", "-x", *TESTS],
                             limits["tests"]))
    steps_json = out / "steps.json"
    sizes = ["--prompts", str(args.prompts), "--group", str(args.group), "--max-new-tokens",
             str(args.max_new_tokens)] + (["--model", args.model] if args.model else [])
    record = run_phase("steps", [python, __file__, "--phase", "steps", "--json", str(steps_json),
                                 "--steps", str(args.steps), *sizes], limits["steps"])
    if steps_json.is_file():
        record["figures"] = json.loads(steps_json.read_text())
    records.append(record)
    engines_json = out / "engines.json"
    bench = ["benchmarks/rollout_engines.py", "--sides", "vllm,hf,trl", "--steps",
             str(args.engine_steps), "--eval-size", str(args.eval_size), "--json",
             str(engines_json), *sizes]
    record = run_phase("engines", [python, *bench], limits["engines"])
    if engines_json.is_file():
        record["figures"] = json.loads(engines_json.read_text()).get("summary")
    records.append(record)
    return records


def steps_phase(args: argparse.Namespace) -> int:
    """A few GRPO steps on the GPU in bf16 (run in its own process by ``phases``)."""
    import tempfile

    import torch

    from learner.config import Config
    from learner.training.trainer import GRPOTrainer

    cfg = Config(env="grpo/MathExact-v0", env_kwargs={"pack": "arith", "level": 2},
                 model=args.model, output_dir=tempfile.mkdtemp(prefix="gpu-check-"),
                 steps=args.steps, prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=1e-5, beta=0.04,
                 eval=False, progress=False, samples_every=0)
    trainer = GRPOTrainer(cfg)
    # The learner skips the reference pass until the first update (the policy is the reference
    # then); run it anyway, which is what this check is for: reference and policy computed alike.
    trainer.update.policy_is_reference = False
    torch.cuda.reset_peak_memory_stats()
    rows = [trainer.train_step().metrics for _ in range(args.steps)]
    figures = {"device": torch.cuda.get_device_name(),
               "mixed_precision": trainer.accelerator.mixed_precision,
               "is_correction": cfg.is_mode, "first_kl": rows[0]["kl"],
               "generate_tokens_per_s": [r["tokens_per_s/generate"] for r in rows],
               "train_tokens_per_s": [r["tokens_per_s/train"] for r in rows],
               "step_s": [r["time/step_s"] for r in rows],
               "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
    trainer.close()
    Path(args.json).write_text(json.dumps(figures, indent=1))
    print(f"KL at step 0 (must be 0): {figures['first_kl']}; peak {figures['peak_gib']:.2f} GiB")
    return 0 if figures["first_kl"] in (0.0, None) else 2


def table(records: list[dict]) -> str:
    lines = ["| phase | status | seconds | detail |", "|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['phase']} | {r['status']} | {r['seconds']:.1f} | "
                     f"{r['detail'].replace('|', '/')} |")
    engines = next((r.get("figures") for r in records if r["phase"] == "engines"), None)
    if engines:
        lines += ["", "| side | median step s | generation tokens/s | held-out accuracy |",
                  "|---|---|---|---|"]
        for side, s in engines.items():
            acc = s.get("heldout_accuracy")
            lines.append(f"| {side} | {s['step_s']:.2f} | {s.get('gen_tokens_per_s', 0):.1f} | "
                         f"{'' if acc is None else f'{acc:.1%}'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.phase == "steps":
        return steps_phase(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = phases(args, out)
    (out / "gpu_check.json").write_text(json.dumps({"phases": records}, indent=1))
    (out / "gpu_check.md").write_text(table(records))
    print(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    return 1 if any(r["status"] == "failed" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
