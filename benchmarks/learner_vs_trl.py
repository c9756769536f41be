"""Our GRPO step against TRL's ``GRPOTrainer``, like for like.

    python benchmarks/learner_vs_trl.py [--steps 6 --prompts 4 --group 8 --max-new-tokens 48]

Each side runs in its own fresh Python process (``--side ours|trl``), in alternating order
(``--rounds`` pairs, the first pair TRL first), so neither inherits the other's warm caches,
math worker pool or allocator. Both use the same model (the embedded SmolLM2-135M-Instruct or
--model), env (grpo/MathExact-v0, arith), P, G, T, LR, steps, seed, torch thread count, loss
type, KL coefficient, reward scaling (``group``) and temperature, gradient checkpointing off
(TRL turns it on by default; ``--trl-gradient-checkpointing`` keeps it), and the same reward
function concurrency (``--reward-workers``, 1 = serial, as TRL calls a reward function).
Our Linear layers run on oneDNN, our CPU default (``learner/sampling/kernels/onednn_linear.py``); TRL's on
torch's BLAS. ``--cpu-matmul torch`` puts ours on torch's BLAS too, to separate the kernel's
share of the ratio from the rest.
Zero-variance groups are treated alike: both keep them in the loss (their KL term counts when
beta > 0). Prints both sides' step times and reward curves, and the ratio of median step times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import warnings

import gymnasium as gym
import sides
import torch

import envs  # noqa: F401  (registers the envs)
from learner.choices import CPU_MATMULS
from learner.config import Config
from learner.model import load_model, load_tokenizer
from learner.training.distributed import cpu_threads
from learner.training.trainer import GRPOTrainer


def run_ours(args, env, tokenizer) -> dict:
    cfg = Config(env="grpo/MathExact-v0", env_kwargs=env_kwargs(args), model=args.model,
                 output_dir=tempfile.mkdtemp(prefix="ours-"), steps=args.steps,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=args.lr, beta=args.beta,
                 loss_type=args.loss_type, eval=False, progress=False, samples_every=0,
                 seed=args.seed, num_threads=args.threads, score_workers=args.reward_workers,
                 scale_rewards="group", temperature=1.0, cpu_matmul=args.cpu_matmul)
    trainer = GRPOTrainer(cfg, model=load_model(args.model), tokenizer=tokenizer, env=env)
    rows = [trainer.train_step().metrics for _ in range(args.steps)]
    return {
        "step_s": [r["time/step_s"] for r in rows],
        "reward": [r["reward/mean"] for r in rows],
        "generate_tokens_per_s": [r["tokens_per_s/generate"] for r in rows],
        "train_tokens_per_s": [r["tokens_per_s/train"] for r in rows],
        "generate_s": [r["time/generate_s"] for r in rows],
        "train_s": [r["time/train_s"] for r in rows],
    }


def run_trl(args, env, tokenizer) -> dict:
    from trl import GRPOTrainer as TRLGRPOTrainer

    timer = sides.trl_step_timer()
    config = sides.trl_config(
        steps=args.steps, prompts=args.prompts, group=args.group,
        max_new_tokens=args.max_new_tokens, lr=args.lr, beta=args.beta, seed=args.seed,
        loss_type=args.loss_type, use_cpu=True, bf16=False,  # fp32 on CPU, as ours
        gradient_checkpointing=args.trl_gradient_checkpointing)
    # The same reward concurrency as ours (score_workers): --reward-workers threads.
    data = sides.trl_dataset(env, args.prompts * args.steps, args.seed)
    trainer = TRLGRPOTrainer(model=load_model(args.model),
                             reward_funcs=sides.trl_reward(env, args.reward_workers), args=config,
                             train_dataset=data, processing_class=tokenizer, callbacks=[timer])
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"step_s": timer.times, "reward": rewards}


def env_kwargs(args) -> dict:
    return {"pack": "arith", "level": args.level}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--loss-type", default="grpo")
    p.add_argument("--level", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the cores this process may use)")
    p.add_argument("--reward-workers", type=int, default=1,
                   help="reward-function threads, both sides (default 1: serial)")
    p.add_argument("--rounds", type=int, default=1,
                   help="pairs of runs, alternating which side goes first (default 1)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true",
                   help="leave TRL's default gradient checkpointing on (ours runs without)")
    p.add_argument("--cpu-matmul", default="onednn", choices=CPU_MATMULS,
                   help="our Linear layers' CPU kernel (default onednn, our default; torch "
                        "uses the same BLAS as TRL)")
    p.add_argument("--side", choices=("ours", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


def run_side(args: argparse.Namespace) -> dict:
    """One side, in this (fresh) process."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    env = gym.make("grpo/MathExact-v0", **env_kwargs(args)).unwrapped
    tokenizer = load_tokenizer(args.model)
    torch.manual_seed(args.seed)
    return (run_ours if args.side == "ours" else run_trl)(args, env, tokenizer)


def main() -> None:
    args = parse()
    args.threads = args.threads or cpu_threads()
    if args.side:
        result = run_side(args)
        with open(args.json, "w") as f:
            json.dump(result, f)
        return
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    order = sides.alternating(["trl", "ours"], args.rounds)
    for side in order:
        runs[side].append(sides.run_fresh(__file__, sys.argv[1:], side))
    # The first step of each run includes warm-up (allocations): compare median step times.
    times = {s: [t for run in runs[s] for t in run["step_s"]] for s in runs}
    t_trl, t_ours = statistics.median(times["trl"]), statistics.median(times["ours"])
    print(f"setup: P={args.prompts} G={args.group} T={args.max_new_tokens} lr={args.lr} "
          f"beta={args.beta} loss={args.loss_type} scale=group steps={args.steps} "
          f"threads={args.threads} reward workers={args.reward_workers} "
          f"our cpu-matmul={args.cpu_matmul} order={order}")
    for side, label in (("trl", "TRL "), ("ours", "ours")):
        for run in runs[side]:
            print(f"{label} step time per step: {fmt(run['step_s'])}  reward: "
                  f"{fmt(run['reward'], 3)}")
    print(f"median step time: TRL {t_trl:.1f} s, ours {t_ours:.1f} s")
    print(f"ratio ours/TRL: {t_ours / t_trl:.2f}  (speed-up x{t_trl / t_ours:.2f})")
    for run in runs["ours"]:
        print(f"ours generate s: {fmt(run['generate_s'])}; train s: {fmt(run['train_s'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "order": order, **runs, "ratio": t_ours / t_trl}, f,
                      indent=1)


def fmt(values, digits: int = 1) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


if __name__ == "__main__":
    main()
