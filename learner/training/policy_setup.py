"""The policy a run trains, ready for its processes: LoRA-wrapped when asked, its frozen
reference (full fine-tuning with a KL term), AdamW and the learning-rate schedule, all prepared
by accelerate, with their Linear layers on the CPU kernel the flags chose (``PolicyUpdate``)."""

from __future__ import annotations

from typing import Any

import torch
from accelerate import Accelerator
from transformers import PreTrainedModel, get_scheduler

from learner.model import with_lora
from learner.sampling.kernels import onednn_linear
from learner.stage_config import UpdateConfig
from learner.training import sharding
from learner.training.distributed import Processes
from learner.training.update import PolicyUpdate


def adamw(params: list[torch.nn.Parameter], *, fused: bool, **kwargs: Any) -> torch.optim.AdamW:
    """AdamW, fused where torch has the kernel for the parameters' device: one pass over each
    parameter instead of several, 3-5x faster steps on CPU, the same update."""
    if fused:
        try:
            return torch.optim.AdamW(params, fused=True, **kwargs)
        except RuntimeError:  # torch < 2.4 fuses on CUDA only
            pass
    return torch.optim.AdamW(params, **kwargs)


def enable_checkpointing(model: PreTrainedModel) -> None:
    """Gradient checkpointing on ``model`` (unwrapped; a PEFT model's base gets it, with its
    inputs' gradients on), before or after ``prepare_policy``."""
    model.gradient_checkpointing_enable()
    model.config.use_cache = True  # generation still uses the KV cache (eval mode)


def prepare_policy(c: UpdateConfig, accelerator: Accelerator, procs: Processes,
                   model: PreTrainedModel, max_tokens: int, *,
                   device: torch.device | None = None) -> PolicyUpdate:
    """The update step around ``model`` (on ``device``, the run's: the accelerator's when
    None): policy, reference, optimizer and schedule prepared."""
    device = device or accelerator.device
    if c.gradient_checkpointing:
        enable_checkpointing(model)
    ref_model = None
    if c.lora_r:
        model = with_lora(model, c.lora_r, c.lora_alpha, c.lora_dropout)
    elif c.beta > 0:
        # A frozen copy of the initial policy (with LoRA, the base model with adapters off).
        ref_model = sharding.reference_copy(model, c.model).eval().requires_grad_(False)
    deepspeed = sharding.uses_deepspeed(accelerator)
    optimizer = adamw([p for p in model.parameters() if p.requires_grad],
                      # torch fuses AdamW on CPU and CUDA, not on the lazy backend
                      fused=not deepspeed and device.type in ("cpu", "cuda"), lr=c.learning_rate,
                      betas=(c.adam_beta1, c.adam_beta2), weight_decay=c.weight_decay)
    # transformers' "constant" drops the warmup it is given: with one, its warmed-up twin.
    schedule = ("constant_with_warmup" if c.lr_scheduler == "constant" and c.warmup_steps
                else c.lr_scheduler)
    scheduler = get_scheduler(
        schedule, optimizer, num_warmup_steps=c.warmup_steps * c.num_iterations,
        num_training_steps=c.steps * c.num_iterations)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    if ref_model is not None:
        ref_model = sharding.prepare_reference(accelerator, ref_model, device,
                                               policy_dtype=next(model.parameters()).dtype)
    if not deepspeed:  # ZeRO-3 wraps the Linear layers' products itself
        for m in (model, ref_model):
            if m is not None:
                onednn_linear.route_on_cpu(m, c.cpu_matmul)
    return PolicyUpdate(c, accelerator, procs, model, ref_model, optimizer, scheduler,
                        max_tokens=max_tokens, deepspeed=deepspeed, device=device)


def adopt_flags(update: PolicyUpdate) -> None:
    """After ``--resume`` loaded a checkpoint: its optimizer state and schedule keep the learning
    rate, weight decay and betas the run started with, whatever the flags say now; set them to
    the flags' (``update.config``; config.json records those), the schedule's position kept.
    The optimizer and schedule may be accelerate's wrappers; every schedule ``prepare_policy``
    makes is a LambdaLR."""
    c = update.config
    inner = getattr(update.optimizer, "optimizer", update.optimizer)
    schedule = getattr(update.scheduler, "scheduler", update.scheduler)
    schedule.base_lrs = [c.learning_rate] * len(inner.param_groups)
    for group, factor in zip(inner.param_groups, schedule.lr_lambdas, strict=True):
        group["initial_lr"] = c.learning_rate
        group["lr"] = c.learning_rate * factor(schedule.last_epoch)
        group["weight_decay"] = c.weight_decay
        group["betas"] = (c.adam_beta1, c.adam_beta2)
    schedule._last_lr = [group["lr"] for group in inner.param_groups]  # get_last_lr()'s
