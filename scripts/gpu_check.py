"""A few GRPO steps on a CUDA GPU in bf16: throughput, peak memory and the KL at step 0; then
the sampling engines side by side.

    python scripts/gpu_check.py [--steps 3 --prompts 8 --group 8 --max-new-tokens 128 --model PATH]

Prints, per step, generation and training tokens/s, and at the end the peak GPU memory and the
KL of the first step, which must be 0: the reference and the policy are computed the same way
(bf16 autocast), so any non-zero value is a precision mismatch, not learning.

Then (unless ``--skip-engines``) ``benchmarks/rollout_engines.py`` trains ``--engine-steps``
steps three times, each in a fresh process on the same model, settings and seed: ours with
``--rollout-engine vllm``, ours with ``hf``, and TRL's GRPOTrainer with vLLM colocated; it
prints generation tokens/s, step time, the engine/trainer log-prob mismatch and the held-out
greedy accuracy on ``--eval-size`` test tasks after the run. It needs vLLM (``pip install -e
".[vllm]"``) and TRL (``".[trl]"``). Exits with a message where no CUDA device is visible.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--lora-r", type=int, default=0)
    p.add_argument("--rollout-engine", default="auto", choices=("auto", "hf", "vllm"))
    p.add_argument("--skip-engines", action="store_true",
                   help="skip the side-by-side run of vllm, hf and TRL with vLLM")
    p.add_argument("--engine-steps", type=int, default=20)
    p.add_argument("--eval-size", type=int, default=64)
    args = p.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device visible: this check needs a GPU", file=sys.stderr)
        return 1
    from learner.config import Config
    from learner.training.trainer import GRPOTrainer

    cfg = Config(env="grpo/MathExact-v0", env_kwargs={"pack": "arith", "level": 2},
                 model=args.model, output_dir=tempfile.mkdtemp(prefix="gpu-check-"),
                 steps=args.steps, prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=1e-5, beta=0.04,
                 lora_r=args.lora_r, eval=False, progress=False, samples_every=0,
                 rollout_engine=args.rollout_engine)
    trainer = GRPOTrainer(cfg)
    print(f"device: {torch.cuda.get_device_name()}; mixed precision: "
          f"{trainer.accelerator.mixed_precision}")
    # The learner skips the reference pass until the first update (the policy is the reference
    # then); run it anyway, which is what this check is for: reference and policy computed alike.
    trainer.policy_is_reference = False
    torch.cuda.reset_peak_memory_stats()
    first_kl = None
    for _ in range(args.steps):
        m = trainer.train_step().metrics
        first_kl = m["kl"] if first_kl is None else first_kl
        print(f"step {trainer.step}: generation {m['tokens_per_s/generate']:.0f} tok/s, "
              f"training {m['tokens_per_s/train']:.0f} tok/s, step {m['time/step_s']:.2f} s, "
              f"reward {m['reward/mean']:.3f}, kl {m['kl']}")
    print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"KL at step 0 (must be 0): {first_kl}")
    status = 0 if first_kl in (0.0, None) else 2
    trainer.close()
    del trainer
    torch.cuda.empty_cache()
    if not args.skip_engines:
        status = status or engines(args)
    return status


def engines(args: argparse.Namespace) -> int:
    """The engines side by side, each in a fresh process (benchmarks/rollout_engines.py)."""
    import importlib.util

    missing = [name for name in ("vllm", "trl") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"engines: {' and '.join(missing)} not installed (pip install -e "
              "\".[vllm,trl]\"); skipped", file=sys.stderr)
        return 3
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "rollout_engines.py"
    cmd = [sys.executable, str(bench), "--sides", "vllm,hf,trl", "--steps",
           str(args.engine_steps), "--prompts", str(args.prompts), "--group", str(args.group),
           "--max-new-tokens", str(args.max_new_tokens), "--eval-size", str(args.eval_size),
           "--lora-r", str(args.lora_r)] + (["--model", args.model] if args.model else [])
    print("engines: " + " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
