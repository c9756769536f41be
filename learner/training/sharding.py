"""What changes when accelerate runs the trainer under DeepSpeed (ZeRO stages 1-3).

The training loop stays the same; these helpers cover the four places where a sharded engine
differs from a plain or DDP-wrapped module: filling DeepSpeed's "auto" config values, the frozen
reference model (sharded like the policy, not a full copy per process), generation (ZeRO-3 keeps
only a shard of every weight, so the full weights are gathered once around a generation batch
instead of once per decoding step) and saving (the full state dict is gathered on save).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType


class UnsupportedBackend(RuntimeError):
    """A distributed mode the trainer does not run under; the message says what to use."""


def check_supported(accelerator: Accelerator, *, lora: bool = False) -> None:
    """FSDP is refused up front rather than left to hang: its forward passes are collective, so
    processes whose generations stop at different lengths would wait on each other forever.
    LoRA under ZeRO-3 is refused too: merging adapters into partitioned weights is not done."""
    if accelerator.distributed_type == DistributedType.FSDP:
        raise UnsupportedBackend(
            "FSDP is not supported by the GRPO learner yet; for sharded training use DeepSpeed "
            "ZeRO-3 (accelerate launch --use_deepspeed --zero_stage 3 ...), or DDP")
    if lora and zero_stage(accelerator) == 3:
        raise UnsupportedBackend(
            "--lora-r with DeepSpeed ZeRO-3 is not supported; LoRA trains few weights, so use "
            "ZeRO-2 (--zero_stage 2) or DDP")


def uses_deepspeed(accelerator: Accelerator) -> bool:
    return accelerator.distributed_type == DistributedType.DEEPSPEED


def zero_stage(accelerator: Accelerator) -> int:
    if not uses_deepspeed(accelerator):
        return 0
    return int(accelerator.state.deepspeed_plugin.zero_stage or 0)


def configure_deepspeed(accelerator: Accelerator, max_grad_norm: float) -> None:
    """Fill the config values DeepSpeed needs before ``prepare`` (no dataloader tells it here).

    The trainer feeds micro-batches of varying size and marks accumulation boundaries itself, so
    DeepSpeed's own accumulation is 1 whatever the config or ``ACCELERATE_GRADIENT_ACCUMULATION_
    STEPS`` say (the engine would divide every loss by it once more), and its micro-batch size
    is nominal.
    """
    if not uses_deepspeed(accelerator):
        return
    plugin = accelerator.state.deepspeed_plugin
    ds = plugin.deepspeed_config
    ds["gradient_accumulation_steps"] = plugin.gradient_accumulation_steps = 1
    for key, value in (("train_micro_batch_size_per_gpu", 1), ("gradient_clipping", max_grad_norm)):
        if ds.get(key, "auto") == "auto":
            ds[key] = value
    ds["train_batch_size"] = ds["train_micro_batch_size_per_gpu"] * accelerator.num_processes * \
        ds["gradient_accumulation_steps"]
    zero = ds.setdefault("zero_optimization", {})
    # Saving the trained model gathers the full weights (the default refuses under ZeRO-3).
    zero["stage3_gather_16bit_weights_on_model_save"] = True


def reference_copy(model: torch.nn.Module, source: str | None) -> torch.nn.Module:
    """An independent copy of the initial policy.

    Under ZeRO-3 transformers partitions a model while loading it; such a model cannot be
    deep-copied (the copy would share the shard bookkeeping), so it is loaded again instead.
    """
    if any(hasattr(p, "ds_id") for p in model.parameters()):
        from learner.model import load_model

        return load_model(source)
    return copy.deepcopy(model)


def prepare_reference(accelerator: Accelerator, ref_model: torch.nn.Module,
                      device: torch.device | None = None, *,
                      policy_dtype: torch.dtype | None = None) -> torch.nn.Module:
    """The frozen reference: sharded with ZeRO-3 (an inference engine, no optimizer),
    otherwise a plain copy on the run's ``device`` (default: the accelerator's). Under ZeRO-1/2
    it takes the prepared policy's ``policy_dtype``: DeepSpeed runs the policy's forward in
    its bf16 (or fp16) copy, so an fp32 reference would hold twice the memory and put the
    precision gap into the KL at step 0. Otherwise, under bf16 autocast, its Linear layers are
    stored in bf16 (``matmul_weights_in``)."""
    if zero_stage(accelerator) != 3:
        if zero_stage(accelerator) in (1, 2) and policy_dtype is not None:
            return ref_model.to(device or accelerator.device, dtype=policy_dtype)
        ref_model = ref_model.to(device or accelerator.device)
        if accelerator.mixed_precision == "bf16":
            matmul_weights_in(ref_model, torch.bfloat16)
        return ref_model
    import deepspeed

    ds = copy.deepcopy(accelerator.state.deepspeed_plugin.deepspeed_config)
    for key in ("optimizer", "scheduler"):
        ds.pop(key, None)
    ds["zero_optimization"] = {"stage": 3, "stage3_param_persistence_threshold": 0}
    engine, *_ = deepspeed.initialize(model=ref_model, config=ds)
    engine.eval()  # the engine's eval() returns None, unlike Module.eval()
    return engine


def matmul_weights_in(model: torch.nn.Module, dtype: torch.dtype) -> int:
    """Store ``model``'s Linear layers (weights and biases) in ``dtype``; returns how many.

    Under autocast to ``dtype`` a Linear layer's product casts its fp32 weight to ``dtype``
    anyway, so a frozen model's outputs do not change by a bit, and its matmul weights take
    half the memory (a 1.5B reference: 3.6 GB instead of 6.2). The input embedding (with a
    tied head's weight) and the norms stay as loaded: they are read outside matmuls, where a
    bf16 copy would change the residual stream, and the KL at the first update would be the
    precision gap instead of 0."""
    # transformers' method, absent from a bare nn.Module (whose __getattr__ types it a tensor)
    get_embeddings: Callable[[], torch.nn.Module | None] | None = getattr(
        model, "get_input_embeddings", None)
    embedding = get_embeddings() if get_embeddings is not None else None
    shared = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    n = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and id(module.weight) not in shared:
            module.to(dtype)
            n += 1
    return n


@contextlib.contextmanager
def full_weights(accelerator: Accelerator, model: torch.nn.Module) -> Iterator[Any]:
    """The unwrapped policy with all its weights present, for generation on this process alone.

    Under ZeRO-3 the shards are gathered for the duration (read-only), and DeepSpeed's module
    hooks are taken off meanwhile (as TRL's ``unwrap_model_for_generation`` does): they would
    release and all-gather every layer again in each forward, a collective per forward, so
    processes making different numbers of forwards went out of step ("Cannot partition a
    param in flight"). Processes may then run any number of forwards without collectives.
    """
    unwrapped = accelerator.unwrap_model(model)
    if zero_stage(accelerator) != 3:
        yield unwrapped
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
        offload = _hooked(model)
        reset = _hooks_off(offload) if offload is not None else None
        try:
            yield unwrapped
        finally:
            if offload is not None:
                _hooks_on(offload, reset)


def _hooked(engine: torch.nn.Module):
    """The ZeRO-3 engine's parameter offload (what holds its module hooks), or None."""
    optimizer = getattr(engine, "optimizer", None)
    offload = getattr(optimizer, "parameter_offload", optimizer)
    return offload if hasattr(offload, "forward_hooks") else None


def _hooks_off(offload):
    """Remove the engine's module hooks; returns the step-reset hook, to put back."""
    from deepspeed.runtime.zero.partitioned_param_coordinator import iter_params

    for param in iter_params(offload.module, recurse=True):
        param.ds_active_sub_modules.clear()
    # The step reset is a collective too while no trace is recorded.
    reset = offload.module._forward_pre_hooks[offload.fwd_pre_hook.id]
    for hook in [*offload.forward_hooks, *offload.backward_hooks, offload.fwd_pre_hook]:
        hook.remove()
    offload.forward_hooks, offload.backward_hooks = [], []
    return reset


def _hooks_on(offload, reset) -> None:
    # DeepSpeed's own order: the step reset first, then every module's fetch and release
    # hooks (re-registering the root invalidates the recorded trace: the next forward
    # records it again).
    offload.fwd_pre_hook = offload.module.register_forward_pre_hook(reset)
    offload._register_deepspeed_module(offload.module)


def bucket_gather(accelerator: Accelerator) -> Callable[[list], Any] | None:
    """Under ZeRO-3, what gathers a list of partitioned parameters whole for the duration (read
    only; every process must gather the same lists in the same order); None otherwise, where
    every process holds its weights whole. The weight sync gathers a bucket at a time with it,
    never the whole model (``vllm_engine.checkpoint_weights``)."""
    if zero_stage(accelerator) != 3:
        return None
    import deepspeed

    return lambda params: deepspeed.zero.GatheredParameters(params, modifier_rank=None)


def full_state_dict(accelerator: Accelerator, model: torch.nn.Module) -> dict | None:
    """The whole policy's state dict (gathered under ZeRO-3; every process must call this)."""
    if zero_stage(accelerator) == 3:
        return accelerator.get_state_dict(model)
    return None  # save_pretrained reads the unwrapped module's own weights
