"""Seconds per learner update on CPU, before and after chunked scores: the loss passes scoring
positions from the final hidden states a chunk at a time (the head and log-softmax on valid
positions only; ``forward.head_apart``) against the full logits of every position the model
ran, padding included (the head left in the model, as before). Same process, same model,
batch and seed, the two sides alternating; reported as a ratio.

    python benchmarks/loss_pass_speed.py [--rounds 3] [--vocab 49152]

The batch is a GRPO step's shape at a small size (P=4, G=8, prompt 48, completions 8-64
tokens) on a 4-layer Qwen2-shaped model (hidden 256) with the embedded model's vocabulary,
where the head is a large share of the work, as it is for Qwen2.5-0.5B (151,936 words).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@contextlib.contextmanager
def full_logits():
    """The loss passes as before: the head inside the model, logits for every position."""
    from learner.training import forward

    real = forward.head_apart

    @contextlib.contextmanager
    def kept(model):
        yield None

    forward.head_apart = kept
    try:
        yield
    finally:
        forward.head_apart = real


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--vocab", type=int, default=49152)
    p.add_argument("--budget", type=int, default=512, help="--micro-batch-tokens")
    args = p.parse_args(argv)
    from transformers import AutoModelForCausalLM

    from learner.config import Config
    from learner.stage_config import UpdateConfig
    from learner.training import placement
    from learner.training.distributed import Processes
    from learner.training.policy_setup import prepare_policy
    from scripts.gpucheck.assets import shape
    from scripts.gpucheck.update_grid import StepShape, step_batch

    torch.set_num_threads(1)
    config = shape("qwen2.5-0.5b", vocab_size=args.vocab, hidden_size=256,
                   intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2)
    step = StepShape(prompts=4, group=8, prompt=48, shortest=8, longest=64)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    where = placement.run_device("cpu")
    c = Config(beta=0.04, learning_rate=1e-6, micro_batch_tokens=args.budget,
               prompts_per_step=step.prompts, group_size=step.group,
               max_new_tokens=step.longest, steps=100, output_dir="unused")
    update = prepare_policy(UpdateConfig.of(c), where.accelerator, Processes(where.accelerator),
                            model, step.longest, device=where.device)
    update.policy_is_reference = False  # the reference pass runs too, as after step 1
    batch = step_batch(step, args.vocab)
    update(batch)  # warm-up: AdamW's state, oneDNN's kernels
    times: dict[str, list[float]] = {"before (full logits)": [], "after (chunked)": []}
    for _ in range(args.rounds):
        for side in times:
            ctx = full_logits() if side.startswith("before") else contextlib.nullcontext()
            with ctx:
                start = time.thread_time()  # this thread's CPU time: the machine is shared
                update(batch)
                times[side].append(time.thread_time() - start)
    before, after = (statistics.median(v) for v in times.values())
    positions = int(batch.positions().sum())
    print(f"update of {positions} positions ({int(batch.completion_mask.sum())} scored), "
          f"vocab {args.vocab}, --micro-batch-tokens {args.budget}, 1 thread, "
          f"median of {args.rounds}:")
    print("| side | CPU seconds per update |")
    print("|---|---|")
    for side, v in times.items():
        print(f"| {side} | {statistics.median(v):.3f} |")
    print(f"before / after: {before / after:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
