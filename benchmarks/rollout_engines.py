"""Our GRPO step with ``--rollout-engine vllm`` against ``hf`` (and, on a GPU, TRL's GRPOTrainer
with vLLM colocated): step time, generation tokens/s, the engine/trainer log-prob mismatch and,
with ``--eval-size``, held-out greedy accuracy after the run.

    python benchmarks/rollout_engines.py [--steps 6 --prompts 4 --group 8 --max-new-tokens 48]
    python benchmarks/rollout_engines.py --sides vllm,hf,trl --eval-size 64     (on a GPU)
    python benchmarks/rollout_engines.py --sides vllm --vllm-dtype bfloat16 --is-correction token

Each side runs in its own fresh Python process (``--side``), the order alternating between
rounds (round 1 in ``--sides`` order, round 2 reversed, ...), with the same model (the embedded
SmolLM2-135M-Instruct or ``--model``), env (the demo's: ``arith`` level 1, boxed numbers),
P, G, T, learning rate, KL coefficient, temperature, seed and torch thread count. The first
step of each run is left out of the medians (warm-up: allocations, the engine's first batch);
the engine's start-up is reported on its own. Generation tokens/s counts the completion tokens
kept (the same for both engines), over the seconds spent generating. The log-prob mismatch
(and, with ``--is-correction``, the truncated IS weights) is printed per step; on CPU the engine
samples in fp32 as the trainer trains, and ``--vllm-dtype bfloat16`` gives it the low-precision
mismatch a GPU engine has.

TRL (``trl``) needs a CUDA GPU: its colocated vLLM loads weights by a route the CPU build does
not take. ``scripts/gpu_check.py`` runs all three on a GPU in one command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

import sides

from learner.choices import IS_CORRECTIONS, VLLM_DTYPES

MISMATCH = ("rollout/logprob_abs_diff_mean", "rollout/logprob_abs_diff_max",
            "rollout/seq_ratio_std", "rollout/seq_ratio_min", "rollout/seq_ratio_max",
            "rollout/is_weight_mean", "rollout/is_clipped_frac")


def run_ours(args: argparse.Namespace, engine: str) -> dict:
    from learner.config import Config
    from learner.training.trainer import GRPOTrainer

    cfg = Config(env="grpo/MathExact-v0", env_kwargs=sides.ENV_KWARGS, model=args.model,
                 output_dir=tempfile.mkdtemp(prefix=f"engines-{engine}-"), steps=args.steps,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=args.lr, beta=args.beta,
                 temperature=1.0, seed=args.seed, num_threads=args.threads, eval=False,
                 eval_size=args.eval_size, eval_perturbations=False, progress=False,
                 samples_every=0, rollout_engine=engine, lora_r=args.lora_r,
                 vllm_gpu_memory_utilization=args.gpu_memory_utilization,
                 vllm_dtype=args.vllm_dtype, is_correction=args.is_correction,
                 async_steps=args.async_steps)
    t0 = time.perf_counter()
    trainer = GRPOTrainer(cfg)
    setup_s = time.perf_counter() - t0
    rows = [trainer.train_step().metrics for _ in range(args.steps)]
    accuracy = trainer.evaluate().metrics["eval/accuracy"] if args.eval_size else None
    out = {
        "setup_s": setup_s,
        "engine_start_s": getattr(trainer.engine, "start_s", None),
        "step_s": [r["time/step_s"] for r in rows],
        "generate_s": [r["time/generate_s"] for r in rows],
        "train_s": [r["time/train_s"] for r in rows],
        "sync_s": [r.get("time/engine_sync_s", 0.0) for r in rows],
        "sampled_tokens": [r["completion/len_mean"] * args.prompts * args.group for r in rows],
        "reward": [r["reward/mean"] for r in rows],
        "mismatch": {k: [r.get(k) for r in rows] for k in MISMATCH},
        "heldout_accuracy": accuracy,
    }
    trainer.close()
    return out


def run_trl(args: argparse.Namespace) -> dict:
    """TRL's GRPOTrainer with vLLM colocated, on the same env, settings and seed."""
    import gymnasium as gym
    import torch
    from trl import GRPOTrainer as TRLGRPOTrainer

    import envs  # noqa: F401  (registers the envs)
    from learner.evaluation.heldout import evaluate, heldout_tasks
    from learner.model import load_model, load_tokenizer, resolve

    if not torch.cuda.is_available():
        raise SystemExit("the trl side needs a CUDA GPU (TRL's colocated vLLM)")
    env = gym.make("grpo/MathExact-v0", **sides.ENV_KWARGS).unwrapped
    tokenizer = load_tokenizer(args.model)
    timer = sides.trl_step_timer()
    config = sides.trl_config(
        steps=args.steps, prompts=args.prompts, group=args.group,
        max_new_tokens=args.max_new_tokens, lr=args.lr, beta=args.beta, seed=args.seed,
        bf16=True, use_vllm=True, vllm_mode="colocate",
        vllm_gpu_memory_utilization=args.gpu_memory_utilization)
    t0 = time.perf_counter()
    trainer = TRLGRPOTrainer(model=load_model(resolve(args.model)),
                             reward_funcs=sides.trl_reward(env, 16),  # as our score_workers
                             args=config, processing_class=tokenizer, callbacks=[timer],
                             train_dataset=sides.trl_dataset(env, args.prompts * args.steps,
                                                             args.seed))
    setup_s = time.perf_counter() - t0
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    accuracy = None
    if args.eval_size:
        # TRL's trainer holds the policy as ``model`` (wrapped by its accelerator).
        policy = trainer.accelerator.unwrap_model(trainer.model)
        result = evaluate(policy, tokenizer, env, heldout_tasks(env, args.eval_size),
                          max_new_tokens=args.max_new_tokens, k=1)
        accuracy = result.metrics()["accuracy"]
    # TRL logs the completion length; its generation time is not separated from the step.
    return {"setup_s": setup_s, "step_s": timer.times, "reward": [h["reward"] for h in logs],
            "sampled_tokens": [h.get("completions/mean_length", 0.0) * args.prompts * args.group
                               for h in logs],
            "heldout_accuracy": accuracy}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--sides", default="vllm,hf", help="comma-separated: vllm, hf, trl")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--lora-r", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the idle cores)")
    p.add_argument("--rounds", type=int, default=1, help="runs per side, alternating order")
    p.add_argument("--eval-size", type=int, default=0,
                   help="held-out greedy accuracy on the first N test tasks after the run")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--vllm-dtype", default="auto", choices=VLLM_DTYPES,
                   help="our vllm side's precision (auto: bfloat16 on a GPU, float32 on CPU); "
                   "bfloat16 on CPU makes a real engine/trainer mismatch")
    p.add_argument("--async-steps", type=int, default=0, choices=(0, 1),
                   help="our sides sample the next step while this one trains")
    p.add_argument("--is-correction", default="none", choices=IS_CORRECTIONS,
                   help="our sides' truncated IS correction; its weights are then reported")
    p.add_argument("--side", help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


def run_side(args: argparse.Namespace) -> dict:
    """One side, in this (fresh) process."""
    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return run_trl(args) if args.side == "trl" else run_ours(args, args.side)


def main() -> None:
    args = parse()
    if not args.threads:
        from learner.training.distributed import cpu_threads

        args.threads = cpu_threads()
    if args.side:
        result = run_side(args)
        with open(args.json, "w") as f:
            json.dump(result, f)
        return
    names = args.sides.split(",")
    runs: dict[str, list[dict]] = {s: [] for s in names}
    order = sides.alternating(names, args.rounds)
    for side in order:
        argv = [*sys.argv[1:], "--threads", str(args.threads)]
        runs[side].append(sides.run_fresh(__file__, argv, side))
    summary = summarise(runs)
    print(f"setup: P={args.prompts} G={args.group} T={args.max_new_tokens} lr={args.lr} "
          f"beta={args.beta} lora_r={args.lora_r} steps={args.steps} threads={args.threads} "
          f"vllm dtype={args.vllm_dtype} is-correction={args.is_correction} "
          f"async-steps={args.async_steps} "
          f"order={order} load average at the end={os.getloadavg()[0]:.1f}")
    for side, s in summary.items():
        print(f"{side:>4}: median step {s['step_s']:.2f} s, generation {s['gen_tokens_per_s']:.1f} "
              f"tokens/s" + (f", engine start {s['engine_start_s']:.0f} s"
                             if s.get("engine_start_s") else "")
              + (f", held-out accuracy {s['heldout_accuracy']:.1%}"
                 if s.get("heldout_accuracy") is not None else ""))
        for run in runs[side]:
            print(f"      step s {fmt(run['step_s'])}  reward {fmt(run['reward'], 3)}")
            for key, values in run.get("mismatch", {}).items():
                if any(v is not None for v in values):
                    print(f"      {key}: {fmt(values, 7)}")
    if "hf" in summary and "vllm" in summary:
        hf, vl = summary["hf"], summary["vllm"]
        print(f"ratio vllm/hf: step time {vl['step_s'] / hf['step_s']:.2f}, generation tokens/s "
              f"{vl['gen_tokens_per_s'] / hf['gen_tokens_per_s']:.2f}")
    if "trl" in summary and "vllm" in summary:
        print(f"ratio ours(vllm)/TRL(vllm): step time "
              f"{summary['vllm']['step_s'] / summary['trl']['step_s']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "order": order, "runs": runs, "summary": summary}, f,
                      indent=1)


def summarise(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Per side: median step time and generation tokens/s over every run's steps but the
    first; engine start-up and held-out accuracy averaged over runs."""
    out = {}
    for side, rs in runs.items():
        steps = [t for r in rs for t in r["step_s"][1:]] or [t for r in rs for t in r["step_s"]]
        s: dict = {"step_s": statistics.median(steps)}
        if all("generate_s" in r for r in rs):
            gen = sum(sum(r["generate_s"][1:]) for r in rs)
            tokens = sum(sum(r["sampled_tokens"][1:]) for r in rs)
            s["gen_tokens_per_s"] = tokens / gen if gen else float("nan")
        else:  # TRL: its generation time is inside the step
            s["gen_tokens_per_s"] = float("nan")
        starts = [r["engine_start_s"] for r in rs if r.get("engine_start_s")]
        s["engine_start_s"] = statistics.mean(starts) if starts else None
        acc = [r["heldout_accuracy"] for r in rs if r.get("heldout_accuracy") is not None]
        s["heldout_accuracy"] = statistics.mean(acc) if acc else None
        out[side] = s
    return out


def fmt(values, digits: int = 2) -> str:
    return "[" + ", ".join("-" if v is None else f"{v:.{digits}g}" if digits > 3
                           else f"{v:.{digits}f}" for v in values) + "]"


if __name__ == "__main__":
    main()
