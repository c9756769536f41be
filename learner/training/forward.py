"""Scoring completions under a model: the log-prob of every completion token, in few passes.

``completion_logprobs`` is what the loss passes use; ``completion_logits`` is the plain
definition it is tested against. Three things keep the former from computing what it throws
away, none of which changes the result beyond float rounding:

- Shared prompts: all G completions of a group share their prompt, so the prompt is run once
  per group and its KV cache (with its autograd graph) is repeated for the group's rows; only
  the completion tokens are then run per row. Gradients flow through the shared prompt exactly
  as through G separate copies.
- Length buckets: rows are sorted by completion length and run in a few passes, each cut to
  its longest row, so right-padding (a third or more of the positions of a typical step, where
  many completions stop early and some run to the budget) is mostly not computed. Padding never
  reaches a valid position (causal attention, masked keys), so which rows share a pass does not
  matter.
- The last completion token is never fed in (what it would predict is not scored), and the
  output head, the log-softmax and the entropy run only on valid positions.

Packing (``packing=True``, ``--packing``): instead of the above, a pass's rows are run as one
packed sequence, each row's prompt and completion one after another with no padding at all,
its position ids restarting at 0 at each row, and attention confined to each row. How the
attention keeps rows apart depends on the model's backend:

- flash attention (``flash_attention_2/3/4``, a hub kernel, any backend whose mask function is
  transformers' ``flash_attention_mask``): variable-length attention, from the rows'
  cumulative lengths (``cu_seq_lens_q/k``, ``max_length_q/k``, passed as TRL's
  ``DataCollatorWithFlattening`` and verl's remove-padding pass them); no mask at all, and
  no attention between rows is computed. ``packing_on`` turns packing on by default there.
- SDPA and eager: transformers sees the restarting position ids (``masking_utils.
  find_packed_sequence_indices``, with no 2D mask) and builds a block-diagonal causal mask,
  dense: (positions x positions) per pass, and the kernels still compute every pair. Exact,
  as the tests show, but it pays only where padding costs more than that; off by default.

A packed row runs its own prompt (rows of a group cannot share a prompt's pass in one packed
sequence), so packing trades the prompts' repeats for the padding: it pays where completions'
lengths vary more than the prompt is long (``benchmarks/loss_pass_speed.py --packing``).

Chunked scores: the model is run with its output head set aside (``head_apart``), so a pass
yields final hidden states, not (positions, vocabulary) logits; the valid positions' hidden
states are then scored ``logit_chunk`` rows at a time (head, log-softmax, the chosen token,
entropy). When a pass holds more rows than one chunk and gradients are on, each chunk runs
under ``torch.utils.checkpoint``: its logits are freed after the forward and recomputed in the
backward, so at most one chunk's logits (and their gradient) exist at once, never the pass's
whole fp32 (positions, vocabulary) tensor nor a copy of it. At Qwen2.5's 151,936 words that
is 0.6 MB a position per copy, most of a 1.5B model's loss-pass memory.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from transformers import DynamicCache

from learner.distribution import token_entropy, token_logprobs
from learner.model import cache_kwarg

# A pass's fixed cost in positions (rows x tokens), which ``length_buckets`` weighs against
# the padding a bucket would compute. On CPU a pass costs little beyond its positions (Python
# and small-matmul overhead), so rows of a P=4, G=8, T=48 step go in about five passes. On an
# accelerator a pass costs kernel launches and padded positions are nearly free, so a few
# thousand positions stay in one pass (a guess: no GPU was available to measure it).
BUCKET_OVERHEAD = {"cpu": 16, "default": 512}
# Elements of a chunk's (rows, vocabulary) logits: 2^27 is 512 MB in fp32, 883 rows at 151,936
# words, 2,730 at SmolLM2's 49,152 (the embedded model's passes then hold one chunk: nothing
# is recomputed).
LOGIT_CHUNK_ELEMENTS = 2**27
# Config fields of models that transform the head's output (softcapping, scaling): the head
# cannot be set apart for those, and their logits are computed whole, as before.
_HEAD_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling",
                    "output_multiplier_scale")


def completion_logprobs(
    model: torch.nn.Module,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    completion_ids: Tensor,
    completion_mask: Tensor,
    groups: Tensor | None = None,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    share_prompts: bool = True,
    entropy: bool = False,
    bucket_overhead: int | None = None,
    logit_chunk: int | None = None,
    packing: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """(B, T) log-probs of ``completion_ids`` (0 where ``completion_mask`` is 0) under the
    sampling distribution (``temperature``, ``top_p``: ``distribution.sampling_logits``) and, with
    ``entropy``, that distribution's entropy at the same positions (detached).

    ``prompt_ids`` are left-padded, ``completion_ids`` right-padded (``completion_mask`` is the
    attention mask: contiguous 1s from the first token); rows with equal ``groups`` have the
    same prompt. ``model`` may be wrapped (DDP) or a PEFT model. ``bucket_overhead``: see
    ``length_buckets`` (default: ``BUCKET_OVERHEAD`` for the model's device). ``logit_chunk``:
    positions scored at a time (default: ``LOGIT_CHUNK_ELEMENTS`` over the vocabulary; see
    the module's docstring). ``packing``: the rows as one packed sequence, without padding
    (the module's docstring; ``share_prompts`` and ``bucket_overhead`` then do not apply).
    """
    with head_apart(model) as head:
        if packing:
            return _packed_logprobs(model, head, prompt_ids, prompt_mask, completion_ids,
                                    completion_mask, temperature=temperature, top_p=top_p,
                                    entropy=entropy, logit_chunk=logit_chunk)
        return _completion_logprobs(model, head, prompt_ids, prompt_mask, completion_ids,
                                    completion_mask, groups, temperature=temperature,
                                    top_p=top_p, share_prompts=share_prompts, entropy=entropy,
                                    bucket_overhead=bucket_overhead, logit_chunk=logit_chunk)


def _completion_logprobs(model, head, prompt_ids, prompt_mask, completion_ids, completion_mask,
                         groups, *, temperature, top_p, share_prompts, entropy, bucket_overhead,
                         logit_chunk) -> tuple[Tensor, Tensor | None]:
    b, t = completion_ids.shape
    device = completion_ids.device
    lengths = completion_lengths(completion_mask)
    if bucket_overhead is None:
        bucket_overhead = BUCKET_OVERHEAD.get(device.type, BUCKET_OVERHEAD["default"])
    scorer = _Scorer(head, completion_mask, temperature, top_p, entropy, logit_chunk)
    prompts = _Prompts(model, prompt_ids, prompt_mask, groups) \
        if share_prompts and groups is not None else None
    index: list[Tensor] = []
    logps: list[Tensor] = []
    ents: list[Tensor] = []
    for rows in length_buckets(lengths, bucket_overhead):
        width = int(lengths[rows].max())
        ids, mask = completion_ids[rows, :width], completion_mask[rows, :width]
        if prompts is not None:
            parts = prompts.completion_logits(rows, ids, mask)
        else:
            parts = [(_plain_logits(model, prompt_ids[rows], prompt_mask[rows], ids, mask), 0)]
        cells = rows.unsqueeze(-1) * t + torch.arange(width, device=device)
        for logits, col in parts:  # the head and log-softmax run on valid positions only
            # (with the head set apart, ``logits`` are the final hidden states)
            cols = slice(col, col + logits.shape[1])
            valid = mask[:, cols].bool()
            # A pass cut to its rows' length is often all valid: then no copy is needed.
            picked = logits.flatten(0, 1) if bool(valid.all()) else logits[valid]
            tokens = ids[:, cols][valid]
            scorer.add(picked, tokens, logps, ents)
            index.append(cells[:, cols][valid])
            del logits, picked
    flat = torch.cat(index) if index else torch.zeros(0, dtype=torch.long, device=device)
    logp = _scatter(flat, logps, b * t, device).view(b, t)
    ent = _scatter(flat, ents, b * t, device).view(b, t) if entropy else None
    return logp, ent


class _Scorer:
    """Scores positions from what the pass yields: the head's logits, or (head set apart) the
    final hidden states, ``logit_chunk`` rows at a time (see the module's docstring)."""

    def __init__(self, head: torch.nn.Module | None, completion_mask: Tensor, temperature: float,
                 top_p: float, entropy: bool, logit_chunk: int | None):
        self.head, self.temperature, self.top_p, self.entropy = head, temperature, top_p, entropy
        if logit_chunk is None and head is not None:
            # out_features, not the weight's shape: ZeRO-3 leaves a partitioned weight empty
            vocab = getattr(head, "out_features", 0) or int(cast(Tensor, head.weight).shape[0])
            logit_chunk = max(1, LOGIT_CHUNK_ELEMENTS // max(vocab, 1))
        self.chunk = logit_chunk or 1
        # Recompute a chunk's logits in the backward only when the pass holds more than one
        # chunk (with one, its logits would be alive at the head's backward anyway).
        self.recompute = (head is not None and torch.is_grad_enabled()
                          and int(completion_mask.sum()) > self.chunk)

    def add(self, picked: Tensor, tokens: Tensor, logps: list[Tensor],
            ents: list[Tensor]) -> None:
        """Appends the log-probs of ``tokens`` (and the entropies) at the ``picked`` rows."""
        if self.head is None:
            logps.append(token_logprobs(picked, tokens, self.temperature, self.top_p))
            if self.entropy:
                with torch.no_grad():
                    ents.append(token_entropy(picked, self.temperature, self.top_p))
            return
        score = _ChunkScore(self.head, self.temperature, self.top_p, self.entropy)
        # Slices, not split(): torch's lazy backend mis-runs a matmul on split's views.
        for i in range(0, picked.shape[0], self.chunk):
            rows_h, rows_t = picked[i:i + self.chunk], tokens[i:i + self.chunk]
            if self.recompute:
                lp, ent = checkpoint(score, rows_h, rows_t, use_reentrant=False,
                                     preserve_rng_state=False)
            else:
                lp, ent = score(rows_h, rows_t)
            logps.append(lp)
            if ent is not None:
                ents.append(ent)


def _packed_logprobs(model, head, prompt_ids, prompt_mask, completion_ids, completion_mask, *,
                     temperature, top_p, entropy, logit_chunk) -> tuple[Tensor, Tensor | None]:
    """``completion_logprobs`` with the rows as one packed sequence (``packing``)."""
    b, t = completion_ids.shape
    device = completion_ids.device
    width = prompt_ids.shape[1]
    lengths = completion_lengths(completion_mask)
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    # Rows with no completion token are left out whole (nothing of theirs is scored).
    attended = torch.cat([prompt_mask, completion_mask], dim=1).bool() & (lengths > 0)[:, None]
    cols = torch.arange(width + t, device=device)
    # Every attended token but a row's last is fed in; the one at column k predicts the
    # token at k + 1, and is scored when that token is a completion token.
    fed = attended & (cols < (width - 1 + lengths)[:, None])
    scored_at = fed & (cols >= width - 1)
    scored = scored_at[:, :-1]  # by the column of the predicted token, less one
    scorer = _Scorer(head, completion_mask, temperature, top_p, entropy, logit_chunk)
    logps: list[Tensor] = []
    ents: list[Tensor] = []
    index = torch.zeros(0, dtype=torch.long, device=device)
    if bool(scored.any()):
        # Row-major boolean indexing: the rows one after another, in order.
        input_ids = ids[fed].unsqueeze(0)
        positions = (attended.long().cumsum(-1) - 1)[fed].unsqueeze(0)
        out = model(input_ids=input_ids, position_ids=positions, use_cache=False,
                    **varlen_kwargs(model, fed.sum(-1)))
        hidden = out.logits[0]  # (positions, hidden): the head is set apart (or vocabulary)
        picked = hidden[scored_at[fed]]
        tokens = ids[:, 1:][scored]
        scorer.add(picked, tokens, logps, ents)
        cells = torch.arange(b, device=device)[:, None] * t + (cols[:-1] + 1 - width)
        index = cells[scored]
        del out, hidden, picked
    logp = _scatter(index, logps, b * t, device).view(b, t)
    ent = _scatter(index, ents, b * t, device).view(b, t) if entropy else None
    return logp, ent


def varlen_kwargs(model: torch.nn.Module, lengths: Tensor) -> dict[str, Any]:
    """The packed rows' cumulative lengths as flash attention's variable-length kwargs
    (``cu_seq_lens_q/k``, ``max_length_q/k``) where the model's backend takes them (``packs
    without mask``); else none (transformers reads the rows from the position ids)."""
    if not packs_without_mask(model):
        return {}
    lengths = lengths[lengths > 0]
    cu = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    longest = int(lengths.max())
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest,
            "max_length_k": longest}


def attention_backend(model: torch.nn.Module) -> str:
    """The name of the attention implementation ``model`` runs (``sdpa``, ``eager``,
    ``flash_attention_2``, ...)."""
    config = getattr(causal_lm(model), "config", None)
    return str(getattr(config, "_attn_implementation", None) or "eager")


def packs_without_mask(model: torch.nn.Module) -> bool:
    """Whether ``model``'s attention runs packed rows as variable-length sequences, with no
    (positions x positions) mask: flash attention's backends, and any backend registered with
    transformers' flash mask function (which builds no mask)."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    name = attention_backend(model)
    mask_fn = ALL_MASK_ATTENTION_FUNCTIONS._global_mapping.get(name)
    return "flash" in name or mask_fn is flash_attention_mask


def packing_on(choice: str, model: torch.nn.Module) -> bool | None:
    """``--packing`` as a run has it: True (on), False (off), or None: decided per update by
    ``packing_pays``. auto is None where the model's attention packs without a mask
    (``packs_without_mask``: flash attention) and False elsewhere (SDPA and eager would need
    a dense block-diagonal mask)."""
    if choice not in ("auto", "on", "off"):
        raise ValueError(f"--packing must be auto, on or off, got {choice!r}")
    if choice == "auto":
        return None if packs_without_mask(model) else False
    return choice == "on"


def padded_positions(prompt_mask: Tensor, completion_mask: Tensor, groups: Tensor | None, *,
                     bucket_overhead: int, share_prompts: bool = True) -> int:
    """The positions ``completion_logprobs`` runs through the model without packing: each
    group's prompt once (else each row's), at the batch's prompt width, and each length
    bucket's rows at its longest completion (the last token not fed)."""
    lengths = completion_lengths(completion_mask)
    width = prompt_mask.shape[1]
    shared = share_prompts and groups is not None
    total = len(torch.unique(groups)) * width if shared and groups is not None else 0
    for rows in length_buckets(lengths, bucket_overhead):
        longest = int(lengths[rows].max())
        total += len(rows) * (longest - 1 if shared else width + longest - 1)
    return total


def packed_positions(prompt_mask: Tensor, completion_mask: Tensor) -> int:
    """The positions ``completion_logprobs`` runs packed: each row with a completion token,
    its prompt and its completion less the last token."""
    lengths = completion_lengths(completion_mask)
    has = lengths > 0
    return int((prompt_mask.sum(-1) + lengths - 1)[has].sum())


class _ChunkScore:
    """One chunk of positions scored from its hidden states: the head's logits, the chosen
    token's log-prob and (detached) the entropy."""

    def __init__(self, head: torch.nn.Module, temperature: float, top_p: float, entropy: bool):
        self.head, self.temperature, self.top_p, self.entropy = head, temperature, top_p, entropy

    def __call__(self, hidden: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        logits = self.head(hidden)
        logp = token_logprobs(logits, tokens, self.temperature, self.top_p)
        ent = None
        if self.entropy:
            with torch.no_grad():
                ent = token_entropy(logits.detach(), self.temperature, self.top_p)
        return logp, ent


def causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside ``model``'s wrappers (DDP's and DeepSpeed's ``.module``,
    PEFT's ``get_base_model()``)."""
    base = model
    while True:
        if hasattr(base, "module") and isinstance(base.module, torch.nn.Module):
            base = base.module
        elif hasattr(base, "get_base_model"):
            # PEFT's method; nn.Module's __getattr__ is typed as returning tensors or modules
            get_base_model = cast(Callable[[], torch.nn.Module], base.get_base_model)
            base = get_base_model()
        else:
            return base


@contextlib.contextmanager
def head_apart(model: torch.nn.Module) -> Iterator[torch.nn.Module | None]:
    """Within the block ``model``'s output head is an identity, so that its ``logits`` are the
    final hidden states; yields the head, to score positions with in chunks. Yields None (the
    model unchanged) where the model transforms the head's output or has no head to set
    apart. The wrappers' forwards still run (DDP's gradient hooks, ZeRO-3's gathering: the
    head is called as a module)."""
    base = causal_lm(model)
    get_head = getattr(base, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    config = getattr(base, "config", None)
    name = next((n for n, m in base.named_children() if m is head), None) \
        if head is not None else None
    if name is None or any(getattr(config, k, None) for k in _HEAD_TRANSFORMS):
        yield None
        return
    setattr(base, name, torch.nn.Identity())
    try:
        yield head
    finally:
        setattr(base, name, head)


def completion_lengths(completion_mask: Tensor) -> Tensor:
    """(B,) one past each row's last attended completion position (0 for an empty row)."""
    if completion_mask.shape[1] == 0:
        return completion_mask.new_zeros(completion_mask.shape[0])
    cols = torch.arange(1, completion_mask.shape[1] + 1, device=completion_mask.device)
    return (completion_mask.bool() * cols).amax(-1)


def length_buckets(lengths: Tensor, overhead: int) -> list[Tensor]:
    """Row indices in passes: contiguous runs of the rows sorted by length, chosen to minimise
    the positions computed (rows x the longest length, per pass) plus ``overhead`` per pass.
    Rows of length 0 are in none."""
    order = torch.argsort(lengths, stable=True)
    order = order[lengths[order] > 0]
    sizes = lengths[order].tolist()
    n = len(sizes)
    cost, cut = [0.0] + [math.inf] * n, [0] * (n + 1)
    for j in range(1, n + 1):  # cost[j]: the best plan for the j shortest rows
        for i in range(j):
            c = cost[i] + (j - i) * sizes[j - 1] + overhead
            if c < cost[j]:
                cost[j], cut[j] = c, i
    buckets, j = [], n
    while j > 0:
        buckets.append(order[cut[j]:j])
        j = cut[j]
    return buckets[::-1]


def _scatter(index: Tensor, parts: list[Tensor], size: int, device: torch.device) -> Tensor:
    if not parts:
        return torch.zeros(size, device=device)
    values = torch.cat(parts)
    return values.new_zeros(size).index_put((index,), values)


def _plain_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask) -> Tensor:
    """(B, T, V): position t predicts completion token t; the last token is not fed in."""
    width = completion_ids.shape[1]
    input_ids = torch.cat([prompt_ids, completion_ids[:, :-1]], dim=1)
    mask = torch.cat([prompt_mask, completion_mask[:, :-1]], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                logits_to_keep=width, use_cache=False)
    return out.logits


class _Prompts:
    """Each group's prompt run once; its KV cache serves any subset of the group's rows."""

    def __init__(self, model, prompt_ids: Tensor, prompt_mask: Tensor, groups: Tensor):
        self.model, self.arg = model, cache_kwarg(model)
        _, self.inverse = torch.unique(groups, return_inverse=True)
        # First row of each group: its prompt stands for the group.
        first = torch.full((int(self.inverse.max()) + 1,), len(groups), device=groups.device)
        first = first.scatter_reduce(0, self.inverse, torch.arange(len(groups),
                                     device=groups.device), reduce="amin")
        self.mask = prompt_mask[first]
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        self.cache = DynamicCache()
        out = model(input_ids=prompt_ids[first], attention_mask=self.mask,
                    position_ids=positions, use_cache=True, logits_to_keep=1,
                    **{self.arg: self.cache})
        self.first_logits = out.logits[:, -1]  # predicts each group's first completion token
        self.start = positions[:, -1:] + 1

    def completion_logits(self, rows: Tensor, completion_ids: Tensor,
                          completion_mask: Tensor) -> list[tuple[Tensor, int]]:
        """Logits for ``rows`` as (logits (n, w, V), first column) pieces: the prompt's last
        position predicts column 0, completion position t - 1 predicts column t."""
        g = self.inverse[rows]
        # index_select, not x[g]: the backward of x[g] adds the rows' gradients into their
        # group's with parallel atomic adds on CPU, in an order that changes from run to run,
        # so one seed gave different runs; index_select's backward (index_add_) adds in order.
        pieces = [(self.first_logits.index_select(0, g).unsqueeze(1), 0)]
        if completion_ids.shape[1] == 1:
            return pieces
        cache = DynamicCache()
        for layer, (keys, values, *_) in enumerate(self.cache):  # a differentiable gather
            cache.update(keys.index_select(0, g), values.index_select(0, g), layer)
        mask = torch.cat([self.mask[g], completion_mask[:, :-1]], dim=1)
        positions = self.start[g] + torch.arange(completion_ids.shape[1] - 1,
                                                 device=rows.device)
        out = self.model(input_ids=completion_ids[:, :-1], attention_mask=mask,
                         position_ids=positions, use_cache=True, **{self.arg: cache})
        return [*pieces, (out.logits, 1)]


def completion_logits(
    model: torch.nn.Module,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    completion_ids: Tensor,
    completion_mask: Tensor,
) -> Tensor:
    """(B, T, V) logits from one plain forward over prompt + completion; position t predicts
    ``completion_ids[:, t]``. The definition ``completion_logprobs`` is checked against."""
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                logits_to_keep=completion_ids.shape[1] + 1, use_cache=False)
    return out.logits[:, :-1]
