"""The learner's update (``PolicyUpdate``: the reference pass, the loss passes and AdamW) over a
grid of loss-pass token budgets x gradient checkpointing, on a batch of a GRPO step's shape:
seconds per update, positions/s, MFU and the peak memory against the learner's memory plan
(``plan_over_peak``: the issue's goal is within 15%), and the loss passes alone (forward and
backward, no reference, no optimizer step): their seconds and MFU.

MFU counts 8N FLOPs per position (6N for the loss pass's forward and backward, 2N for the
reference's forward), N the model's parameters, against the card's measured bf16 matmul rate;
the loss passes' MFU counts 6N.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from scripts.gpucheck import device as dev


@dataclass(frozen=True)
class StepShape:
    """A GRPO step's batch: P prompts of ``prompt`` tokens, G completions each, of lengths
    spread over [``shortest``, ``longest``] (random-init completions run long)."""

    prompts: int = 16
    group: int = 8
    prompt: int = 150
    shortest: int = 100
    longest: int = 512


def step_batch(shape: StepShape, vocab: int, seed: int = 0) -> Any:
    """A ``Batch`` of that shape with random tokens and advantages (on the CPU, as the trainer
    hands it to the update)."""
    from learner.training.batching import Batch

    g = torch.Generator().manual_seed(seed)
    rows = shape.prompts * shape.group
    lengths = torch.randint(shape.shortest, shape.longest + 1, (rows,), generator=g)
    completion_mask = (torch.arange(shape.longest) < lengths[:, None]).long()
    prompt_ids = torch.randint(0, vocab, (shape.prompts, shape.prompt), generator=g)
    return Batch(
        prompt_ids=prompt_ids.repeat_interleave(shape.group, 0),
        prompt_mask=torch.ones(rows, shape.prompt, dtype=torch.long),
        completion_ids=torch.randint(0, vocab, (rows, shape.longest), generator=g)
        * completion_mask,
        completion_mask=completion_mask, loss_mask=completion_mask.clone(),
        advantages=torch.randn(rows, generator=g),
        groups=torch.arange(shape.prompts).repeat_interleave(shape.group),
        n_sequences=float(rows), n_tokens=float(completion_mask.sum()))


def plan_gb(model_config: Any, params: int, shape: StepShape, budget: int, *,
            checkpointing: bool = False, autocast: bool = False, positions: int = 0,
            completion_share: float = 0.5) -> float:
    """The learner's memory plan for this update (``learner/training/memory_plan.py``), the
    batch's positions known (``positions``, 0: unknown), without the host's share
    (``BASE_BYTES``: not on the GPU) and without sampling (the update does not sample)."""
    from learner.training import memory_plan

    plan = memory_plan.estimate(
        model_config, trainable=params, total=params, reference=True,
        rows=shape.prompts * shape.group, context=shape.prompt + shape.longest,
        micro_batch_tokens=budget, completion_share=completion_share, autocast=autocast,
        checkpointing=checkpointing, prompt=shape.prompt, group_size=shape.group,
        kv_cache=False, step_positions=positions)
    return (plan.resident + plan.loss_pass) / 1e9


def loss_passes(update: Any, batch: Any, budget: int, device: torch.device) -> float:
    """Seconds of the update's loss passes alone over ``batch`` (its micro-batches under
    ``budget``; forward and backward, the gradients then dropped)."""
    micro = [mb.to(device) for mb in batch.split_by_tokens(batch.parts_for(budget))]
    update.model.train()
    dev.synchronize(device)
    start = time.perf_counter()
    for mb in micro:
        with update.accelerator.autocast():
            logp, _ = update.logprobs(update.model, mb)
            (logp * mb.loss_mask).sum().backward()
    dev.synchronize(device)
    seconds = time.perf_counter() - start
    update.optimizer.zero_grad(set_to_none=True)
    return seconds


def measure(model_config: Any, device: torch.device, *, budget: int, checkpointing: bool,
            shape: StepShape, peak_tflops: float | None, timed: int,
            warm_up: bool = True) -> dict[str, Any]:
    """One grid point: a fresh policy, one warm-up update, then ``timed`` updates."""
    from learner.config import Config
    from learner.stage_config import UpdateConfig
    from learner.training.distributed import Processes
    from learner.training.policy_setup import prepare_policy
    from scripts.gpucheck.assets import random_model

    config = Config(beta=0.04, learning_rate=1e-6, micro_batch_tokens=budget,
                    gradient_checkpointing=checkpointing, prompts_per_step=shape.prompts,
                    group_size=shape.group, max_new_tokens=shape.longest, steps=timed + 1,
                    output_dir="unused")
    accelerator, placed = dev.accelerator_on(device)
    dev.reset_peak(device)
    model = random_model(model_config, device)
    params = sum(p.numel() for p in model.parameters())
    update = prepare_policy(UpdateConfig.of(config), accelerator, Processes(accelerator), model,
                            shape.longest, **placed)
    # Past the first optimizer step the reference pass runs: time the update as a run pays it.
    update.policy_is_reference = False
    batch = step_batch(shape, model_config.vocab_size)
    positions = int(batch.positions().sum())
    completions = int(batch.completion_mask.sum())
    autocast = accelerator.mixed_precision == "bf16"
    try:
        if warm_up:  # kernels chosen, optimizer state made
            update(batch)
            dev.synchronize(device)
        start = time.perf_counter()
        for _ in range(timed):
            stats = update(batch)
        dev.synchronize(device)
        seconds = (time.perf_counter() - start) / timed
        loss_seconds = loss_passes(update, batch, budget, device)
    finally:
        del update, model
        accelerator.free_memory()
        gc.collect()
    out = {"micro_batch_tokens": budget, "checkpointing": checkpointing, "autocast": autocast,
           "params": params, "positions": positions, "seconds": round(seconds, 3),
           "positions_per_s": round(positions / seconds, 1), "loss": stats.loss,
           "loss_pass_seconds": round(loss_seconds, 3),
           "plan_gb": round(plan_gb(model_config, params, shape, budget,
                                    checkpointing=checkpointing, autocast=autocast,
                                    positions=positions,
                                    completion_share=completions / positions), 2)}
    if peak_tflops:
        out["mfu"] = round(8 * params * positions / seconds / (peak_tflops * 1e12), 4)
        out["loss_mfu"] = round(6 * params * positions / loss_seconds / (peak_tflops * 1e12), 4)
    peak = dev.peak_gb(device)
    if peak is not None:
        out["peak_gb"] = round(peak, 1)
        out["plan_over_peak"] = round(out["plan_gb"] / peak, 3)
    return out


def run(model_config: Any, device: torch.device, *, grid: list[tuple[int, bool]],
        shape: StepShape, peak_tflops: float | None, timed: int, warm_up: bool = True,
        time_left: Callable[[], float], report: Callable[[list[dict]], None]) -> list[dict]:
    """Every grid point while time is left; a point the device cannot hold is recorded as
    such. ``report`` gets the rows after each point (a run cut short keeps them)."""
    rows: list[dict[str, Any]] = []
    for budget, checkpointing in grid:
        if time_left() <= 0:
            rows.append({"micro_batch_tokens": budget, "checkpointing": checkpointing,
                         "error": "skipped: the check's time was up"})
            continue
        try:
            rows.append(measure(model_config, device, budget=budget, checkpointing=checkpointing,
                                shape=shape, peak_tflops=peak_tflops, timed=timed,
                                warm_up=warm_up))
        except torch.OutOfMemoryError as exc:
            gc.collect()
            torch.cuda.empty_cache()
            rows.append({"micro_batch_tokens": budget, "checkpointing": checkpointing,
                         "error": f"out of memory: {str(exc).splitlines()[0][:160]}"})
        report(rows)
    return rows
