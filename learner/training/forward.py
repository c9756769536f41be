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

Chunked scores: the model is run with its output head set aside (``head_apart``), so a pass
yields final hidden states, not (positions, vocabulary) logits; the valid positions' hidden
states are then scored ``logit_chunk`` rows at a time (head, log-softmax, the chosen token,
entropy). When a pass holds more rows than one chunk and gradients are on, each chunk runs
under ``torch.utils.checkpoint``: its logits are freed after the forward and recomputed in the
backward, so at most one chunk's logits (and their gradient) exist at once, never the pass's
whole fp32 (positions, vocabulary) tensor nor a copy of it. At Qwen2.5's 151,936 words that
was 0.6 MB a position per copy, most of a 1.5B model's loss-pass memory.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import cast

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
) -> tuple[Tensor, Tensor | None]:
    """(B, T) log-probs of ``completion_ids`` (0 where ``completion_mask`` is 0) under the
    sampling distribution (``temperature``, ``top_p``: ``distribution.sampling_logits``) and, with
    ``entropy``, that distribution's entropy at the same positions (detached).

    ``prompt_ids`` are left-padded, ``completion_ids`` right-padded (``completion_mask`` is the
    attention mask: contiguous 1s from the first token); rows with equal ``groups`` have the
    same prompt. ``model`` may be wrapped (DDP) or a PEFT model. ``bucket_overhead``: see
    ``length_buckets`` (default: ``BUCKET_OVERHEAD`` for the model's device). ``logit_chunk``:
    positions scored at a time (default: ``LOGIT_CHUNK_ELEMENTS`` over the vocabulary; see
    the module's docstring).
    """
    with head_apart(model) as head:
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
    if logit_chunk is None and head is not None:
        # out_features, not the weight's shape: ZeRO-3 leaves a partitioned weight empty here
        vocab = getattr(head, "out_features", 0) or int(head.weight.shape[0])
        logit_chunk = max(1, LOGIT_CHUNK_ELEMENTS // max(vocab, 1))
    # Recompute a chunk's logits in the backward only when the pass holds more than one chunk
    # (with one, its logits would be alive at the head's backward anyway).
    recompute = (head is not None and torch.is_grad_enabled()
                 and int(completion_mask.sum()) > logit_chunk)
    prompts = _Prompts(model, prompt_ids, prompt_mask, groups) \
        if share_prompts and groups is not None else None
    index, logps, ents = [], [], []
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
            if head is None:
                logps.append(token_logprobs(picked, tokens, temperature, top_p))
                if entropy:
                    with torch.no_grad():
                        ents.append(token_entropy(picked, temperature, top_p))
            else:
                # Slices, not split(): torch's lazy backend mis-runs a matmul on split's views.
                for i in range(0, picked.shape[0], logit_chunk):
                    rows_h, rows_t = picked[i:i + logit_chunk], tokens[i:i + logit_chunk]
                    score = _ChunkScore(head, temperature, top_p, entropy)
                    if recompute:
                        lp, ent = checkpoint(score, rows_h, rows_t, use_reentrant=False,
                                             preserve_rng_state=False)
                    else:
                        lp, ent = score(rows_h, rows_t)
                    logps.append(lp)
                    if entropy:
                        ents.append(ent)
            index.append(cells[:, cols][valid])
            del logits, picked
    flat = torch.cat(index) if index else torch.zeros(0, dtype=torch.long, device=device)
    logp = _scatter(flat, logps, b * t, device).view(b, t)
    ent = _scatter(flat, ents, b * t, device).view(b, t) if entropy else None
    return logp, ent


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
