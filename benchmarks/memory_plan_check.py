"""The memory plan (``learner/training/memory_plan.py``) against the peak a learner update
allocates, measured on CPU at small Qwen2-shaped models: the ratio plan / measured for fp32 and
bf16 autocast, with and without gradient checkpointing, with logits in one chunk and in many.

    python benchmarks/memory_plan_check.py [--vocab 4096 32768] [--layers 4] [--packing]

``--packing``: the loss passes packed (``--packing on``; SDPA's dense mask on CPU), the plan
counting packed positions.

CPU torch has no ``max_memory_allocated``: the peak is read from the profiler's allocation
events (``profile_memory=True``: every allocation and free, in order), added to the bytes the
tensors held before the update (weights, the reference, AdamW's moments). The update is the
learner's own ``PolicyUpdate`` (reference pass, loss passes, AdamW) on a GRPO step's batch, its
second call (the first makes the optimizer's state). The plan is compared without its host
share (``BASE_BYTES``) and without sampling, which the update does not do. The same ratio on a
GPU comes from ``scripts/gpu_check.py`` (``torch.cuda.max_memory_allocated``).
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def tensor_bytes(update) -> int:
    """Bytes held by the policy, the reference and the optimizer's state now."""
    seen, total = set(), 0
    tensors = [*update.model.parameters()]
    if update.ref_model is not None:
        tensors += [*update.ref_model.parameters(), *update.ref_model.buffers()]
    tensors += [*update.model.buffers()]
    for state in update.optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def profiled_peak(fn) -> int:
    """The most bytes allocated at once, over the ones allocated before, while ``fn`` runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    now = peak = 0
    for e in events:
        now += e.nbytes()
        peak = max(peak, now)
    return peak


def measure(vocab: int, layers: int, *, autocast: bool, checkpointing: bool, chunk: int,
            budget: int, packing: bool = False) -> dict:
    from accelerate.state import AcceleratorState
    from transformers import AutoModelForCausalLM

    from learner.config import Config
    from learner.stage_config import UpdateConfig
    from learner.training import forward, memory_plan, placement
    from learner.training.distributed import Processes
    from learner.training.policy_setup import prepare_policy
    from scripts.gpucheck.assets import shape
    from scripts.gpucheck.update_grid import StepShape, step_batch

    forward.LOGIT_CHUNK_ELEMENTS = memory_plan.LOGIT_CHUNK_ELEMENTS = chunk
    AcceleratorState._reset_state(reset_partial_state=True)
    config = shape("qwen2.5-0.5b", vocab_size=vocab, hidden_size=128, intermediate_size=512,
                   num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2)
    step = StepShape(prompts=4, group=4, prompt=32, shortest=16, longest=96)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())
    where = placement.run_device("cpu", autocast="bf16" if autocast else "off")
    c = Config(beta=0.04, learning_rate=1e-6, micro_batch_tokens=budget,
               gradient_checkpointing=checkpointing, prompts_per_step=step.prompts,
               group_size=step.group, max_new_tokens=step.longest, steps=3, output_dir="unused",
               cpu_matmul="torch", packing="on" if packing else "off")
    update = prepare_policy(UpdateConfig.of(c), where.accelerator, Processes(where.accelerator),
                            model, step.longest, device=where.device)
    update.policy_is_reference = False  # the reference pass runs, as after the first step
    batch = step_batch(step, vocab)
    update(batch)  # AdamW's state made
    gc.collect()
    before = tensor_bytes(update)
    delta = profiled_peak(lambda: update(batch))
    positions = int(batch.positions(packed=packing).sum())
    plan = memory_plan.estimate(
        config, trainable=params, total=params, reference=True, rows=step.prompts * step.group,
        context=step.prompt + step.longest, micro_batch_tokens=budget,
        completion_share=float(batch.completion_mask.sum()) / positions, autocast=autocast,
        checkpointing=checkpointing, prompt=step.prompt, group_size=step.group, kv_cache=False,
        step_positions=positions, packing=packing, mask_bytes=1 if packing else 0)
    planned = plan.resident + plan.loss_pass
    measured = before + delta
    return {"vocab": vocab, "autocast": autocast, "checkpointing": checkpointing,
            "chunk_rows": max(1, chunk // vocab), "positions": positions,
            "measured_mb": measured / 1e6, "plan_mb": planned / 1e6,
            "loss_pass_measured_mb": (measured - plan.resident) / 1e6,
            "loss_pass_plan_mb": plan.loss_pass / 1e6, "ratio": planned / measured}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, nargs="+", default=[4096, 32768])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--budget", type=int, default=512, help="--micro-batch-tokens")
    p.add_argument("--packing", action="store_true", help="--packing on")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print("| vocab | autocast | checkpointing | logit chunk rows | measured MB | plan MB | "
          "loss pass measured MB | loss pass plan MB | plan / measured |")
    print("|---|---|---|---|---|---|---|---|---|")
    for vocab in args.vocab:
        for autocast in (False, True):
            for checkpointing in (False, True):
                # logits in many chunks of 32 rows (recomputed in the backward), else one
                chunk = 32 * vocab if vocab > 8192 else 2**27
                r = measure(vocab, args.layers, autocast=autocast, checkpointing=checkpointing,
                            chunk=chunk, budget=args.budget, packing=args.packing)
                print(f"| {vocab} | {'bf16' if autocast else 'off'} | "
                      f"{'on' if checkpointing else 'off'} | {r['chunk_rows']} | "
                      f"{r['measured_mb']:.1f} | {r['plan_mb']:.1f} | "
                      f"{r['loss_pass_measured_mb']:.1f} | {r['loss_pass_plan_mb']:.1f} | "
                      f"{r['ratio']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
