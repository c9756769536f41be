"""A run's peak memory, estimated before its first step from the model's shape and the flags, so
that a run the machine cannot hold says so in one line instead of being killed by the kernel,
and so that a run that fits only with gradient checkpointing gets it (``check``).

The estimate adds what is resident all run to the larger of the two phases of a step:
sampling (the KV cache of P x G rows; none with vLLM, which holds its own share) and a loss
pass. Its terms, in bytes (N parameters, T of them trained; h hidden, i intermediate, L layers,
V words; c the compute dtype's bytes: 2 under bf16 autocast, else 4):

- resident: the fp32 weights 4N, their gradients 4T and AdamW's two moments 8T, and the
  frozen reference (none at beta 0 or with LoRA, whose reference is the base with adapters
  off): 4N, or under bf16 autocast c per matmul weight and 4 per embedding weight
  (``sharding.matmul_weights_in``);
- a loss pass: per position, the activations saved for the backward pass, per layer
  ``FP32_HIDDEN`` x h floats in fp32 (the residual stream and the norms, which run in fp32
  with fp32 weights) plus ``COMPUTE_HIDDEN`` x h + ``COMPUTE_INTERMEDIATE`` x i in the
  compute dtype (the norms' outputs cast for the matmuls, q, k, v, the attention output; the
  MLP's gate, up, activation and product), and the final hidden states twice (the pass's and
  its valid positions'); with gradient checkpointing, each layer's fp32 input only, plus one
  layer's activations while it is recomputed, and the prompts repeated per row (the shared
  prompt pass and checkpointing do not mix: ``update.PolicyUpdate.logprobs``); then
  constants: one chunk of logits (``forward.LOGIT_CHUNK_ELEMENTS``, ``LOGIT_COPIES`` fp32
  copies: never the pass's whole logits), the head's and embedding's weight gradients being
  summed (``HEAD_GRAD_COPIES`` x V x h in fp32, full fine-tuning) and, under autocast, the
  bf16 copies of the weights autocast makes for the matmuls (2N, saved for the backward).

With ``--packing`` a pass's positions are the packed ones, each row with its own prompt and no
padding (``batching.Batch.positions(packed=True)``, which the budget then counts): the prompts'
repeats are in the positions already, so checkpointing's prompt factor does not apply. Where
the attention needs a dense block-diagonal mask for them (SDPA, eager: ``forward``), the mask's
(positions x positions) bytes are added.

The per-position constants were measured on SmolLM2-135M on CPU (fp32: 14 x h + 5 x i floats a
layer); ``benchmarks/memory_plan_check.py`` compares the plan with a measured peak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch-free at import
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from envs.contract import LearnerEnv
    from learner.config import Config

# Values saved per position and layer for the backward pass (see the module's docstring).
FP32_HIDDEN, COMPUTE_HIDDEN, COMPUTE_INTERMEDIATE = 4, 10, 5
# The older names, in fp32: 14 x hidden and 5 x intermediate floats.
HIDDEN_COPIES, INTERMEDIATE_COPIES = FP32_HIDDEN + COMPUTE_HIDDEN, COMPUTE_INTERMEDIATE
# fp32 copies of a chunk's (rows, vocabulary) logits alive at once (the head's output, then
# in the backward the softmax of the log-sum-exp and the logits' gradient), fitted on CPU
# (benchmarks/memory_plan_check.py).
LOGIT_COPIES = 2
# fp32 (vocabulary, hidden) gradients of the head's and the embedding's weight alive at once
# beside the one the gradients' term counts, when they train: each chunk's head gradient, and
# their sum into the tied weight's (measured on CPU: 2).
HEAD_GRAD_COPIES = 2
# Elements of a chunk of logits (``forward.LOGIT_CHUNK_ELEMENTS``, kept here torch-free).
LOGIT_CHUNK_ELEMENTS = 2**27
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
    checkpointing: bool = False  # the loss pass recomputes activations

    @property
    def peak(self) -> float:
        return BASE_BYTES + self.resident + max(self.sampling, self.loss_pass)


def estimate(model_config: Any, *, trainable: int, total: int, reference: bool, rows: int,
             context: int, micro_batch_tokens: int, completion_share: float = 0.5,
             bytes_per_float: int = 4, autocast: bool = False, checkpointing: bool = False,
             prompt: int = 0, group_size: int = 1, kv_cache: bool = True,
             step_positions: int = 0, packing: bool = False,
             mask_bytes: int = 0) -> MemoryPlan:
    """``trainable`` / ``total``: parameter counts; ``rows``: P x G; ``context``: prompt +
    completion tokens of the longest row; ``micro_batch_tokens``: positions of a loss pass as
    ``batching`` counts them, a group's prompt once (0: the whole step's, ``rows x
    context``); ``completion_share``: the part of those positions that are completion tokens
    (they are scored); ``autocast``: bf16 autocast; ``checkpointing``: gradient
    checkpointing; ``prompt`` and ``group_size``: the prompt's tokens and G (with
    checkpointing each row runs its prompt); ``kv_cache``: the learner samples (not vLLM);
    ``step_positions``: the step's positions when known or bounded (0: unknown): a step is
    split into as few passes as the budget allows, of equal size (``batching``), so a pass
    holds the step's share, which may be under the budget. ``packing``: ``--packing`` on,
    ``micro_batch_tokens`` and ``step_positions`` counting packed positions (a prompt per row,
    no padding); ``mask_bytes``: bytes per (position, position) pair of the dense mask the
    attention builds for packed rows (0: none, flash attention; 1: SDPA's bool mask; 4 or 2:
    eager's float mask)."""
    layers = int(model_config.num_hidden_layers)
    hidden = int(model_config.hidden_size)
    inter = int(getattr(model_config, "intermediate_size", 4 * hidden))
    heads = int(model_config.num_attention_heads)
    kv_heads = int(getattr(model_config, "num_key_value_heads", heads) or heads)
    head_dim = int(getattr(model_config, "head_dim", hidden // heads) or hidden // heads)
    vocab = int(model_config.vocab_size)
    b = bytes_per_float
    c = 2 if autocast else b
    embedding = min(vocab * hidden, total)
    ref = 0
    if reference:
        ref = c * (total - embedding) + b * embedding if autocast else b * total
    resident = b * (total + trainable * 3) + ref  # weights, grads + 2 moments, reference
    sampling = (b * rows * context * layers * 2 * kv_heads * head_dim + b * rows * vocab * 4
                if kv_cache else 0.0)
    positions = micro_batch_tokens or rows * context
    if step_positions and micro_batch_tokens:
        positions = min(positions, -(-step_positions // -(-step_positions // positions)))
    layer = FP32_HIDDEN * hidden * b + COMPUTE_HIDDEN * hidden * c + COMPUTE_INTERMEDIATE * inter * c
    if checkpointing:
        per_position: float = layers * hidden * b + layer + 2 * hidden * b
        if prompt and group_size > 1 and not packing:  # each row runs its prompt: more positions
            completion = max(context - prompt, 0) / 2
            per_position *= (prompt + completion) / (prompt / group_size + completion)
    else:
        per_position = layers * layer + 2 * hidden * b
    scored = max(1, int(positions * completion_share))
    logits = LOGIT_COPIES * 4 * min(scored, max(1, LOGIT_CHUNK_ELEMENTS // vocab)) * vocab
    casts = 2 * total if autocast else 0
    head_grads = HEAD_GRAD_COPIES * b * vocab * hidden if trainable >= total else 0
    mask = mask_bytes * positions**2 if packing else 0
    return MemoryPlan(resident, sampling,
                      positions * per_position + logits + casts + head_grads + mask,
                      per_position, sampling / max(rows, 1) if rows else 0.0, checkpointing)


def within(make: Callable[[bool], MemoryPlan], available: float,
           checkpointing: bool) -> MemoryPlan:
    """The plan ``make(checkpointing)`` builds; when it is over ``available`` bytes without
    gradient checkpointing and fits with it, the plan with it (``MemoryPlan.checkpointing``
    then says the run must turn it on)."""
    plan = make(checkpointing)
    if not checkpointing and plan.peak > available:
        replan = make(True)
        if replan.peak <= available:
            return replan
    return plan


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
          device: torch.device, main: bool, autocast: bool = False) -> MemoryPlan:
    """The run's estimated peak memory (``policy`` the unwrapped model; ``autocast``: bf16).
    Over what the machine (on a CUDA ``device``: the GPU's free memory) has available: when
    gradient checkpointing would fit, the plan with it (``checkpointing``: the caller turns it
    on) and one line saying so; else one line naming the flag value that fits, so that the
    run is not killed midway."""
    import torch

    from learner.model import chat_prompt

    params = list(policy.parameters())
    size = env.pack.size("train")  # None: a procedural pack's unbounded stream
    prompts = [env.prompt(env.pack.task_at("train", i))
               for i in range(16 if size is None else min(16, size))]
    widest = max((len(tokenizer(chat_prompt(tokenizer, p))["input_ids"]) for p in prompts),
                 default=0)

    from learner.training.forward import attention_backend, packs_without_mask

    # The trainer resolved auto but for flash attention's, where an update packs or not by
    # its rows (``PolicyUpdate.packing_pays``): the larger of the two plans.
    layouts = [c.packing == "on"]
    if c.packing == "auto" and packs_without_mask(policy):
        layouts = [False, True]
    mask_bytes = 0
    if not packs_without_mask(policy):
        mask_bytes = 1 if attention_backend(policy) == "sdpa" else (2 if autocast else 4)
    prompts_per_process = c.prompts_per_step // world

    def layout(checkpointing: bool, packing: bool) -> MemoryPlan:
        return estimate(
            policy.config, trainable=sum(p.numel() for p in params if p.requires_grad),
            total=sum(p.numel() for p in params), reference=reference,
            rows=c.prompts_per_step * c.group_size // world, context=widest + max_tokens,
            micro_batch_tokens=c.micro_batch_tokens, autocast=autocast,
            checkpointing=checkpointing, prompt=widest, group_size=c.group_size,
            kv_cache=not c.engine_is_vllm,
            # at most: every completion at the budget, a group's prompt once (packed: a row's)
            step_positions=(prompts_per_process * c.group_size * (widest + max_tokens)
                            if packing else
                            prompts_per_process * (widest + c.group_size * max_tokens)),
            packing=packing, mask_bytes=mask_bytes)

    def make(checkpointing: bool) -> MemoryPlan:
        return max((layout(checkpointing, packing) for packing in layouts),
                   key=lambda plan: plan.peak)

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
    plan = within(make, available, c.gradient_checkpointing)
    if plan.checkpointing and not c.gradient_checkpointing:
        line: str | None = (f"note: turning on --gradient-checkpointing: this run's estimated peak memory "
                f"is {make(False).peak / 1e9:.1f} GB without it, {plan.peak / 1e9:.1f} GB with "
                f"it, of the {available / 1e9:.1f} GB {where}")
    else:
        line = warning(plan, available, c.micro_batch_tokens, where=where,
                       group_size=c.group_size, world=world)
        line = line and f"warning: {line}"
    if line and main:
        print(line, flush=True)
    return plan
