"""Seconds per learner update on CPU, packed (``--packing on``: a pass's rows as one packed
sequence, no padding, each row with its own prompt) against padded (``--packing off``: a
group's prompt run once, rows in length buckets cut to their longest), on a GRPO step whose
completions' lengths vary widely. Same process, model, batch and seed, the two sides
alternating; reported as ratios.

    python benchmarks/packing_speed.py [--rounds 3] [--prompt 32] [--shortest 8] [--longest 192]

Positions processed are counted where the model is entered (its input ids, every pass: the
reference pass and the loss passes), so they are what ran, not what was planned. On CPU the
packed pass runs SDPA with transformers' dense block-diagonal mask (``learner.training.
forward``); on a GPU with flash attention it runs variable-length attention instead, and the
padded side's buckets are fewer and wider there (``forward.BUCKET_OVERHEAD``): the last line
counts one pass's positions there, as ``--packing auto`` does to choose (``--count-only``: that
line alone, at any shape, e.g. the issue's: ``--prompts 64 --prompt 150 --shortest 100
--longest 512 --budget 16384``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Positions:
    """Counts the token positions entering ``model``'s embedding."""

    def __init__(self, model: torch.nn.Module):
        self.count = 0
        model.get_input_embeddings().register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        self.count += int(args[0].numel())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--shortest", type=int, default=8)
    p.add_argument("--longest", type=int, default=192)
    p.add_argument("--budget", type=int, default=512, help="--micro-batch-tokens")
    p.add_argument("--count-only", action="store_true",
                   help="only count the positions on a GPU (no model, no timing)")
    args = p.parse_args(argv)
    from transformers import AutoModelForCausalLM

    from learner.config import Config
    from learner.stage_config import UpdateConfig
    from learner.training import placement
    from learner.training.distributed import Processes
    from learner.training.policy_setup import prepare_policy
    from scripts.gpucheck.assets import shape
    from scripts.gpucheck.update_grid import StepShape, step_batch

    step = StepShape(prompts=args.prompts, group=args.group, prompt=args.prompt,
                     shortest=args.shortest, longest=args.longest)
    batch = step_batch(step, args.vocab)
    if args.count_only:
        print(f"P={step.prompts} x G={step.group}, prompt {step.prompt}, completions "
              f"{step.shortest}-{step.longest}, --micro-batch-tokens {args.budget}:")
        print(gpu_positions(batch, args.budget))
        return 0
    torch.set_num_threads(1)
    config = shape("qwen2.5-0.5b", vocab_size=args.vocab, hidden_size=256,
                   intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    where = placement.run_device("cpu")
    c = Config(beta=0.04, learning_rate=1e-6, micro_batch_tokens=args.budget,
               prompts_per_step=step.prompts, group_size=step.group,
               max_new_tokens=step.longest, steps=100, output_dir="unused", packing="off")
    update = prepare_policy(UpdateConfig.of(c), where.accelerator, Processes(where.accelerator),
                            model, step.longest, device=where.device)
    update.policy_is_reference = False  # the reference pass runs too, as after step 1
    counters = [Positions(m) for m in (update.model, update.ref_model) if m is not None]
    update(batch)  # warm-up: AdamW's state, oneDNN's kernels
    sides = {"padded (--packing off)": False, "packed (--packing on)": True}
    times: dict[str, list[float]] = {side: [] for side in sides}
    positions: dict[str, int] = {}
    for _ in range(args.rounds):
        for side, packed in sides.items():
            update.packing = packed
            before = sum(k.count for k in counters)
            start = time.thread_time()  # this thread's CPU time: the machine is shared
            update(batch)
            times[side].append(time.thread_time() - start)
            positions[side] = sum(k.count for k in counters) - before
    padded, packed = (statistics.median(times[s]) for s in sides)
    lengths = batch.completion_mask.sum(-1)
    print(f"update (reference pass, loss pass, AdamW) of P={step.prompts} x G={step.group}, "
          f"prompt {step.prompt}, completions {int(lengths.min())}-{int(lengths.max())} "
          f"tokens (mean {float(lengths.float().mean()):.0f}), {int(lengths.sum())} scored; "
          f"vocab {args.vocab}, --micro-batch-tokens {args.budget}, 1 thread, median of "
          f"{args.rounds}:")
    print("| side | positions processed | CPU seconds per update |")
    print("|---|---|---|")
    for side in sides:
        print(f"| {side} | {positions[side]} | {statistics.median(times[side]):.3f} |")
    names = list(sides)
    print(f"positions padded / packed: {positions[names[0]] / positions[names[1]]:.2f}x; "
          f"seconds padded / packed: {padded / packed:.2f}x")
    print(gpu_positions(batch, args.budget))
    return 0


def gpu_positions(batch, budget: int) -> str:
    """One pass's positions on a GPU (the padded passes at its bucket overhead, fewer and
    wider), counted as ``--packing auto`` counts them to choose (``PolicyUpdate.packing_pays``)."""
    from learner.training import forward

    overhead = forward.BUCKET_OVERHEAD["default"]
    padded = sum(forward.padded_positions(mb.prompt_mask, mb.completion_mask, mb.groups,
                                          bucket_overhead=overhead)
                 for mb in batch.split_by_tokens(batch.parts_for(budget)))
    packed = forward.packed_positions(batch.prompt_mask, batch.completion_mask)
    nominal = int(batch.positions().sum())
    return (f"one pass's positions on a GPU (bucket overhead {overhead}): nominal (a group's "
            f"prompt once, no padding) {nominal}, padded {padded} "
            f"({padded / nominal:.3f}x nominal), packed {packed} ({packed / nominal:.3f}x); "
            f"padded / packed {padded / packed:.2f}x: auto "
            f"{'packs' if packed < padded else 'keeps the padded passes'}")


if __name__ == "__main__":
    sys.exit(main())
