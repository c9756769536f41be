"""Held-out evaluation's generation tokens/s against the training rollout's, on the same engine
(the learner's own loop) and device.

    python benchmarks/eval_vs_rollout.py [--rounds 3 --prompts 8 --group 8 --max-new-tokens 64]

One process, one trainer (the embedded model or ``--model``, grpo/MathExact-v0 arith, held-out
evaluation as a run does it by default: ``--eval-size`` tasks greedy, then the perturbed
prompts of the first 16). Each round runs a step's collect and an evaluation in alternating
order (after one warm-up collect). Every generate call both make is timed where it happens
(``sample_graded``'s ``generate``), with the completion tokens it kept: tokens/s is kept tokens
over seconds spent generating (grading left out). Prints both, their ratio, and the rows per
generate call. On a shared machine the best round of each side is the figure to read.

Like for like: one trainer, so one engine (``--rollout-engine``'s, the learner's own loop on
CPU), one device and one torch thread count for both sides; both count the completion tokens
their rows kept (``Rollout.lengths``), neither counts prompt tokens. That leaves evaluation the
cost the rollout shares: the rollout prefills P prompts for P x G rows, evaluation one prompt
per row (64 held-out plus 45 perturbed prompts of 38-84 tokens at the defaults).

Where evaluation's time goes (one thread, seconds per evaluation at the defaults): decoding
steps 8.9, prefill 5.0 (4,342 positions for 109 prompts: the 24 tokens every prompt shares, the
chat template's system turn, are prefilled once and copied to each row, ``decoding``'s
``SharedPrefix``, and runs of like lengths are prefilled apart, ``like_lengths``), the refills'
own steps and merges 0.7, sampling and log-probs 0.3, grading 0.04. Evaluation decodes at the
rollout's speed per token; what it pays more is one prompt per row (the question comes before
the env's instructions, so nothing after the system turn is shared), where a step prefills one
prompt per G rows. Figures over time: ``docs/results.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/eval_vs_rollout.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--eval-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the learner's)")
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--cpu-seconds", action="store_true",
                   help="time generation in this process's CPU seconds, not wall-clock "
                        "seconds (steadier on a loaded machine; with --threads 1)")
    args = p.parse_args(argv)

    import learner.sampling.graded as graded
    from learner.config import Config
    from learner.training.trainer import GRPOTrainer

    warnings.filterwarnings("ignore")
    calls: list[tuple[int, int, float]] = []  # rows, kept tokens, seconds
    generate = graded.generate

    clock = time.process_time if args.cpu_seconds else time.perf_counter

    def timed(*a, **k):
        t0 = clock()
        roll = generate(*a, **k)
        calls.append((len(roll.texts), int(roll.lengths.sum()), clock() - t0))
        return roll

    graded.generate = timed
    kwargs = {"model": args.model} if args.model else {}
    cfg = Config(env="grpo/MathExact-v0", env_kwargs={"pack": "arith", "level": 1},
                 output_dir=tempfile.mkdtemp(prefix="eval-vs-rollout-"),
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, eval_size=args.eval_size,
                 num_threads=args.threads, progress=False, samples_every=0, **kwargs)
    trainer = GRPOTrainer(cfg)
    trainer.collect()  # warm-up
    figures: dict[str, list[float]] = {"rollout": [], "eval": []}
    rows: dict[str, list[int]] = {"rollout": [], "eval": []}
    for r in range(args.rounds):
        for side in ("rollout", "eval") if r % 2 == 0 else ("eval", "rollout"):
            calls.clear()
            t0 = time.perf_counter()
            trainer.collect() if side == "rollout" else trainer.evaluate()
            wall = time.perf_counter() - t0
            tokens, seconds = sum(c[1] for c in calls), sum(c[2] for c in calls)
            figures[side].append(tokens / seconds)
            rows[side] = [c[0] for c in calls]
            print(f"round {r + 1} {side:>7}: {tokens} tokens in {seconds:.1f} s generating "
                  f"({tokens / seconds:.0f} tokens/s), {wall:.1f} s in all, "
                  f"{len(calls)} generate calls of {rows[side]} rows", flush=True)
    for name, pick in (("best", max), ("median", statistics.median)):
        roll, ev = pick(figures["rollout"]), pick(figures["eval"])
        print(f"{name}: rollout {roll:.0f} tokens/s, evaluation {ev:.0f} tokens/s: "
              f"evaluation / rollout = {ev / roll:.2f}", flush=True)
    trainer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
