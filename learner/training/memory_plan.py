"""A run's peak memory, estimated before its first step from the model's shape and the flags, so
that a run the machine cannot hold says so in one line instead of being killed by the kernel.

The estimate adds what is resident all run (weights, gradients, AdamW's two moments, the frozen
reference) to the larger of the two phases of a step: sampling (the KV cache of P x G rows) and
a loss pass (activations saved for the backward pass of ``--micro-batch-tokens`` positions, and
the logits over the vocabulary of its completion positions). The per-position constants were
measured on SmolLM2-135M on CPU (2.5-3 MB a position in fp32, of which the logits are about a
third): close enough to tell 6 GB from 20 GB, which is all a warning needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch-free at import
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from envs.learner_env import LearnerEnv
    from learner.config import Config

# Floats saved per position and layer for the backward pass: the hidden state's residual stream,
# norms, q/k/v/o and attention output (~14 x hidden), and the MLP's gate, up, activation and
# product (~5 x intermediate).
HIDDEN_COPIES, INTERMEDIATE_COPIES = 14, 5
# Copies of a completion position's logits alive at once: logits, scaled, logsumexp's and their
# gradients.
LOGIT_COPIES = 5
# The interpreter, torch, the env and the allocator's slack, measured at about 1.5 GB before
# the model loads.
BASE_BYTES = 1.5e9


@dataclass(frozen=True)
class MemoryPlan:
    """Estimated bytes of each part; ``peak`` is what the run should reach at most."""

    resident: float  # weights, gradients, optimizer state, reference
    sampling: float  # the KV cache of a step's rows
    loss_pass: float  # one micro-batch's activations and logits
    per_position: float = 0.0  # a loss pass's bytes per position (0: unknown)
    per_row: float = 0.0  # sampling's bytes per row (0: unknown)

    @property
    def peak(self) -> float:
        return BASE_BYTES + self.resident + max(self.sampling, self.loss_pass)


def estimate(model_config: Any, *, trainable: int, total: int, reference: bool, rows: int,
             context: int, micro_batch_tokens: int, completion_share: float = 0.5,
             bytes_per_float: int = 4) -> MemoryPlan:
    """``trainable`` / ``total``: parameter counts; ``rows``: P x G; ``context``: prompt +
    completion tokens of the longest row; ``micro_batch_tokens``: positions of a loss pass
    (0: the whole step's, ``rows x context``); ``completion_share``: the part of a pass's
    positions that are completion tokens (their logits are kept)."""
    layers = int(model_config.num_hidden_layers)
    hidden = int(model_config.hidden_size)
    inter = int(getattr(model_config, "intermediate_size", 4 * hidden))
    heads = int(model_config.num_attention_heads)
    kv_heads = int(getattr(model_config, "num_key_value_heads", heads) or heads)
    head_dim = int(getattr(model_config, "head_dim", hidden // heads) or hidden // heads)
    vocab = int(model_config.vocab_size)
    b = bytes_per_float
    resident = b * (total + trainable * 3 + (total if reference else 0))  # grads + 2 moments
    sampling = b * rows * context * layers * 2 * kv_heads * head_dim + b * rows * vocab * 4
    positions = micro_batch_tokens or rows * context
    per_position = layers * (HIDDEN_COPIES * hidden + INTERMEDIATE_COPIES * inter)
    position_bytes = b * (per_position + completion_share * LOGIT_COPIES * vocab)
    return MemoryPlan(resident, sampling, positions * position_bytes, position_bytes,
                      sampling / max(rows, 1))


#: The smallest --micro-batch-tokens worth suggesting (below it a pass is mostly overhead).
MIN_MICRO_BATCH_TOKENS = 64


def fitting_flags(plan: MemoryPlan, available: float, micro_batch_tokens: int, *,
                  group_size: int = 0, world: int = 1) -> str:
    """The flag values under which ``plan`` fits in ``available`` bytes: the largest
    --micro-batch-tokens (a multiple of 64) whose loss pass fits, and where sampling does not,
    the most --prompts-per-step whose rows' KV cache does (``group_size``: G, 0 unknown)."""
    room = available - BASE_BYTES - plan.resident
    if room <= 0:
        return "--lora-r 16 (the model and its optimizer state alone do not fit) or a smaller model"
    fixes = []
    if plan.loss_pass > room:
        tokens = int(room // plan.per_position) // 64 * 64 if plan.per_position else 0
        if tokens >= MIN_MICRO_BATCH_TOKENS:
            fixes.append(f"--micro-batch-tokens {tokens}")
        else:
            fixes.append(f"--micro-batch-tokens {MIN_MICRO_BATCH_TOKENS} with "
                         "--gradient-checkpointing")
    if plan.sampling > room:
        rows = int(room // plan.per_row) if plan.per_row else 0
        prompts = rows * world // group_size if group_size else 0
        fixes.append(f"--prompts-per-step {prompts}" if prompts >= world
                     else "a smaller --group-size or --max-new-tokens")
    return " and ".join(fixes) or f"--micro-batch-tokens {max(64, micro_batch_tokens // 2)}"


def warning(plan: MemoryPlan, available: float, micro_batch_tokens: int, *,
            where: str = "this machine has available", group_size: int = 0,
            world: int = 1) -> str | None:
    """One line when ``plan`` will not fit in ``available`` bytes (``where`` says whose),
    naming the flag value that fits (None when it fits)."""
    if plan.peak <= available:
        return None
    gb = 1e9
    lower = fitting_flags(plan, available, micro_batch_tokens, group_size=group_size,
                          world=world)
    return (f"this run's estimated peak memory, {plan.peak / gb:.1f} GB (model and optimizer "
            f"{plan.resident / gb:.1f}, sampling {plan.sampling / gb:.1f}, a loss pass "
            f"{plan.loss_pass / gb:.1f}), is over the {available / gb:.1f} GB {where}: "
            f"lower it with {lower}")


def check(c: Config, env: LearnerEnv, tokenizer: PreTrainedTokenizerBase,
          policy: PreTrainedModel, *, reference: bool, world: int, max_tokens: int,
          device: torch.device, main: bool) -> MemoryPlan:
    """The run's estimated peak memory (``policy`` the unwrapped model); one line before the
    first step when it is over what the machine (on a CUDA ``device``: the GPU's free memory)
    has available, naming the flag value that fits, so that the run is not killed midway."""
    import torch

    from learner.model import chat_prompt

    params = list(policy.parameters())
    size = env.pack.size("train")  # None: a procedural pack's unbounded stream
    prompts = [env.prompt(env.pack.task_at("train", i))
               for i in range(16 if size is None else min(16, size))]
    widest = max((len(tokenizer(chat_prompt(tokenizer, p))["input_ids"]) for p in prompts),
                 default=0)
    plan = estimate(
        policy.config, trainable=sum(p.numel() for p in params if p.requires_grad),
        total=sum(p.numel() for p in params), reference=reference,
        rows=c.prompts_per_step * c.group_size // world, context=widest + max_tokens,
        micro_batch_tokens=c.micro_batch_tokens)
    where = "this machine has available"
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        # What this process holds there already (the weights: the plan counts them), and the
        # host's share, which is not on the GPU.
        available = free + torch.cuda.memory_allocated(device) + BASE_BYTES
        where = f"free on {device}"
    else:
        import psutil

        # What is free plus what this process holds already (the plan counts it).
        available = (psutil.virtual_memory().available
                     + psutil.Process().memory_info().rss) / world
    line = warning(plan, available, c.micro_batch_tokens, where=where,
                   group_size=c.group_size, world=world)
    if line and main:
        print(f"warning: {line}", flush=True)
    return plan
