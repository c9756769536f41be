"""Peak resident memory of a GRPO run: ours against TRL's ``GRPOTrainer``, like for like, and how
ours grows as P x G and T double.

    python benchmarks/learner_memory.py [--steps 2 --prompts 8 --group 8 --max-new-tokens 64]

Each run is a fresh Python process (``--side``), so no side inherits another's allocator or
caches; the parent samples the resident memory of the child's whole process tree (its math
worker pool included) every 0.1 s and keeps the peak. The sides, in alternating order:

- ``trl``: TRL's GRPOTrainer, fp32 on CPU, gradient checkpointing off (as ours);
- ``ours``: our trainer with its defaults (micro-batches under ``--micro-batch-tokens``);
- ``ours-whole``: ours with the whole step in one loss pass (``--micro-batch-tokens 0``), as
  every step was before the token budget.

All on the same model (the embedded SmolLM2-135M-Instruct or --model), env and reward
(grpo/MathExact-v0 arith by default; ``--env``, ``--env-kwargs``), P, G, T, learning rate, beta, seed and
torch threads. Then ``ours`` again at 2 x P and at 2 x T (``--growth``), for the growth table.
Prints a markdown table with the peaks and the ratio ours / TRL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import warnings

import psutil
import sides


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of ``proc`` and all its descendants (gone ones count 0)."""
    total = 0
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # the process (or a child being listed) has just exited
        return 0
    for p in tree:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


class PeakSampler:
    """While open, samples the resident memory of process ``pid``'s tree every ``every`` s;
    ``peak`` is the most seen, in bytes (0 before the first sample)."""

    def __init__(self, pid: int, every: float = 0.1):
        self.proc, self.every, self.peak = psutil.Process(pid), every, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss(self.proc))
            if self._done.wait(self.every):
                return

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def run_sampled(argv: list[str]) -> tuple[dict | None, float]:
    """Run this script with ``argv`` in a fresh process; its JSON result (None when it failed,
    e.g. killed for memory: its peak so far still counts) and peak tree RSS (GB)."""
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    child = subprocess.Popen([sys.executable, __file__, *argv, "--json", out])
    with PeakSampler(child.pid) as sampler:
        code = child.wait()
    peak = sampler.peak
    if code != 0:
        print(f"{argv[1]} exited with {code}" + (" (killed: out of memory?)" if code == -9
                                                   else ""), file=sys.stderr)
        return None, peak / 1e9
    with open(out) as f:
        return json.load(f), peak / 1e9


def run_ours(args: argparse.Namespace, env, tokenizer) -> dict:
    from learner.config import Config
    from learner.model import load_model
    from learner.training.trainer import GRPOTrainer

    cfg = Config(env=args.env, env_kwargs=args.env_kwargs, model=args.model,
                 output_dir=tempfile.mkdtemp(prefix="ours-"), steps=args.steps,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=args.lr, beta=args.beta,
                 eval=False, progress=False, samples_every=0, seed=args.seed,
                 num_threads=args.threads, temperature=1.0, scale_rewards="group",
                 micro_batch_tokens=0 if args.side == "ours-whole" else args.micro_batch_tokens)
    trainer = GRPOTrainer(cfg, model=load_model(args.model), tokenizer=tokenizer, env=env)
    rows = [trainer.train_step().metrics for _ in range(args.steps)]
    return {"step_s": [r["time/step_s"] for r in rows],
            "peak_rss_gb": [r.get("memory/peak_rss_gb") for r in rows]}


def run_trl(args: argparse.Namespace, env, tokenizer) -> dict:
    from trl import GRPOTrainer as TRLGRPOTrainer

    from learner.model import load_model

    timer = sides.trl_step_timer()
    config = sides.trl_config(steps=args.steps, prompts=args.prompts, group=args.group,
                              max_new_tokens=args.max_new_tokens, lr=args.lr, beta=args.beta,
                              seed=args.seed, use_cpu=True, bf16=False)
    data = sides.trl_dataset(env, args.prompts * args.steps, args.seed)
    trainer = TRLGRPOTrainer(model=load_model(args.model), reward_funcs=sides.trl_reward(env, 1),
                             args=config, train_dataset=data, processing_class=tokenizer,
                             callbacks=[timer])
    trainer.train()
    return {"step_s": timer.times}


def run_side(args: argparse.Namespace) -> dict:
    import gymnasium as gym
    import torch

    import envs  # noqa: F401  (registers the envs)
    from learner.model import load_tokenizer

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    env = gym.make(args.env, **args.env_kwargs).unwrapped
    tokenizer = load_tokenizer(args.model)
    torch.manual_seed(args.seed)
    return (run_trl if args.side == "trl" else run_ours)(args, env, tokenizer)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--micro-batch-tokens", type=int, default=512)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: idle cores)")
    p.add_argument("--env", default="grpo/MathExact-v0")
    p.add_argument("--env-kwargs", type=json.loads, default={"pack": "arith"})
    p.add_argument("--sides", default="trl,ours,ours-whole")
    p.add_argument("--no-growth", dest="growth", action="store_false",
                   help="skip ours at 2 x P and at 2 x T")
    p.add_argument("--side", choices=("ours", "ours-whole", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


def child_argv(args: argparse.Namespace, side: str, **override: int) -> list[str]:
    values = {"prompts": args.prompts, "group": args.group,
              "max_new_tokens": args.max_new_tokens, **override}
    argv = ["--side", side, "--steps", str(args.steps), "--lr", str(args.lr),
            "--beta", str(args.beta), "--seed", str(args.seed), "--threads", str(args.threads),
            "--micro-batch-tokens", str(args.micro_batch_tokens),
            "--env", args.env, "--env-kwargs", json.dumps(args.env_kwargs)]
    argv += [f"--{k.replace('_', '-')}={v}" for k, v in values.items()]
    return argv + (["--model", args.model] if args.model else [])


def median_step(result: dict | None) -> float | None:
    if not result or not result["step_s"]:
        return None
    return sorted(result["step_s"])[len(result["step_s"]) // 2]


def main() -> None:
    args = parse()
    if args.side:
        with open(args.json, "w") as f:
            json.dump(run_side(args), f)
        return
    from learner.training.distributed import cpu_threads

    args.threads = args.threads or cpu_threads()
    rows: list[tuple[str, int, int, int, float, float | None]] = []
    for side in sides.alternating(args.sides.split(","), 1):
        print(f"running {side} in a fresh process ...", file=sys.stderr, flush=True)
        result, peak = run_sampled(child_argv(args, side))
        rows.append((side, args.prompts, args.group, args.max_new_tokens, peak,
                     median_step(result)))
    if args.growth:
        for override in ({"prompts": 2 * args.prompts},
                         {"max_new_tokens": 2 * args.max_new_tokens},
                         {"prompts": 2 * args.prompts, "max_new_tokens": 2 * args.max_new_tokens}):
            print(f"running ours with {override} ...", file=sys.stderr, flush=True)
            result, peak = run_sampled(child_argv(args, "ours", **override))
            rows.append(("ours", override.get("prompts", args.prompts), args.group,
                         override.get("max_new_tokens", args.max_new_tokens), peak,
                         median_step(result)))
    print(f"\nsetup: steps={args.steps} lr={args.lr} beta={args.beta} threads={args.threads} "
          f"env={args.env} {args.env_kwargs} micro-batch-tokens={args.micro_batch_tokens}")
    print("| side | P | G | T | peak RSS (GB, process tree) | median step s |")
    print("|---|---|---|---|---|---|")
    for side, p, g, t, peak, step in rows:
        # A side that did not finish (killed for memory) reached at least its sampled peak.
        shown = f"{peak:.2f}" if step is not None else f">= {peak:.2f} (did not finish)"
        print(f"| {side} | {p} | {g} | {t} | {shown} | "
              f"{'-' if step is None else f'{step:.1f}'} |")
    peaks = {r[0]: r[4] for r in rows[:len(args.sides.split(","))]}
    if "trl" in peaks and "ours" in peaks:
        print(f"ratio ours / TRL (peak RSS): {peaks['ours'] / peaks['trl']:.2f}")
    if "ours-whole" in peaks and "ours" in peaks:
        print(f"ratio ours / ours-whole: {peaks['ours'] / peaks['ours-whole']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
