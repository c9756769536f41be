"""What ``--is-correction`` changes when the engine samples a distribution off the trainer's.

    python benchmarks/is_correction_effect.py [--vllm-dtype bfloat16 --batches 2 --threads 2]

The vLLM engine samples the demo's env (``arith`` level 1, boxed numbers; P prompts x G
completions of up to ``--max-new-tokens``) at ``--vllm-dtype`` (bfloat16 by default: on CPU it
gives the engine the low-precision mismatch a GPU engine has, against the trainer's fp32), and
the learner takes each batch through one update three times, the optimizer step held back: with
the correction off, at the token level and at the sequence level. Printed per batch: the
log-prob mismatch, the weights' mean and the share the cap cut, the loss, and how far the
corrected gradient is from the uncorrected one (cosine, and the norm of the difference over the
norm of the uncorrected gradient). Then the same with the engine in float32, as the baseline a
mismatch of float noise gives. Each precision runs in a fresh process, one after the other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings

import sides

from learner.choices import VLLM_DTYPES

LEVELS = ("none", "token", "sequence")


def measure(args: argparse.Namespace) -> list[dict]:
    """In this process: ``--batches`` batches sampled by the engine at ``args.side``'s
    precision, each through one held-back update per correction level."""
    import torch

    from learner.config import Config
    from learner.training.trainer import GRPOTrainer

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = Config(env="grpo/MathExact-v0", env_kwargs=sides.ENV_KWARGS, model=args.model,
                 output_dir=tempfile.mkdtemp(prefix="is-effect-"), steps=args.batches,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, beta=args.beta, temperature=1.0,
                 seed=args.seed, num_threads=args.threads, eval=False, progress=False,
                 samples_every=0, rollout_engine="vllm", vllm_dtype=args.side,
                 is_correction="none", is_cap=args.is_cap,
                 max_grad_norm=0.0)  # the gradients as computed, not clipped to one norm
    trainer = GRPOTrainer(cfg)
    trainer.update.optimizer.step = lambda: None  # the same weights for every level and batch
    trainer.update.optimizer.zero_grad = lambda set_to_none=True: None
    trainer.update.policy_is_reference = False  # every row computed, the KL term included
    params = list(trainer.policy.parameters())
    rows = []
    for b in range(args.batches):
        samples = trainer.collect()
        batch = trainer.batch(samples, trainer.advantages(samples))
        if batch is None:
            continue
        grads, row = {}, {"batch": b}
        for level in LEVELS:
            for p in params:
                p.grad = None
            cfg.is_correction = level
            stats = trainer.update(batch)
            grads[level] = torch.cat([p.grad.flatten() for p in params]).double()
            row[level] = {"loss": stats.loss, "grad_norm": float(grads[level].norm()),
                          "grad_max": float(grads[level].abs().max()),
                          **stats.is_correction}
            row["mismatch"] = stats.mismatch
        for level in LEVELS[1:]:
            diff = grads[level] - grads["none"]
            row[level]["cosine_to_none"] = float(torch.nn.functional.cosine_similarity(
                grads[level], grads["none"], dim=0))
            row[level]["rel_diff_to_none"] = float(diff.norm() / grads["none"].norm())
        rows.append(row)
    trainer.close()
    return rows


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--vllm-dtype", default="bfloat16", choices=VLLM_DTYPES[1:],
                   help="the engine's precision to measure; float32 runs after it as baseline")
    p.add_argument("--batches", type=int, default=2)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--is-cap", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the idle cores)")
    p.add_argument("--side", help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    if not args.threads:
        from learner.training.distributed import cpu_threads

        args.threads = cpu_threads()
    if args.side:
        with open(args.json, "w") as f:
            json.dump(measure(args), f)
        return
    argv = [*sys.argv[1:], "--threads", str(args.threads)]
    results = {dtype: sides.run_fresh(__file__, argv, dtype)
               for dtype in dict.fromkeys([args.vllm_dtype, "float32"])}
    print(f"setup: P={args.prompts} G={args.group} T={args.max_new_tokens} beta={args.beta} "
          f"cap={args.is_cap} seed={args.seed} threads={args.threads}; the trainer in float32")
    for dtype, rows in results.items():
        for row in rows:
            m = row["mismatch"]
            print(f"engine {dtype}, batch {row['batch']}: |dlogp| per token mean "
                  f"{m['rollout/logprob_abs_diff_mean']:.2e} max "
                  f"{m['rollout/logprob_abs_diff_max']:.2e}; sequence ratio "
                  f"{m['rollout/seq_ratio_min']:.3f}..{m['rollout/seq_ratio_max']:.3f}")
            print(f"    none:     loss {row['none']['loss']:+.5f}, "
                  f"grad norm {row['none']['grad_norm']:.4f}")
            for level in LEVELS[1:]:
                r = row[level]
                print(f"    {level + ':':<9} loss {r['loss']:+.5f}, grad norm "
                      f"{r['grad_norm']:.4f}, weights mean {r['rollout/is_weight_mean']:.4f}, "
                      f"cut {r['rollout/is_clipped_frac']:.1%}; gradient against none: cosine "
                      f"{r['cosine_to_none']:.4f}, |difference|/|none| "
                      f"{r['rel_diff_to_none']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
