"""The decoding loop shared by single-turn rollouts and the turns of multi-turn episodes.

One call decodes a batch of contexts together, written for small models on CPU as much as GPUs:

- a prompt shared by ``repeat`` rows (a group) is prefilled once and its KV cache repeated;
- the leading tokens every context starts with (the chat template's system turn) are prefilled
  once and their KV cache copied to each row, which prefills only the rest of its context;
- a prefill forwards runs of contexts of like lengths apart (a padding position costs what a
  token costs), their caches then merged;
- finished rows leave the batch (their cache rows are dropped) once enough have finished, so
  late decoding steps pay only for the rows still running;
- the cache is written in place (``kernels.kv_cache``); the caller packs the weights for oneDNN
  once around all its calls (``kernels.onednn_linear.packed_weights``);
- on CPU, attention reads each key-value head once for its group of query heads
  (``kernels.gqa_sdpa``), where transformers copies them per query head.

Every sampled token's log-prob under the distribution it was drawn from (temperature, top-p:
``distribution.sampling_logits``) is recorded, for the same tokens the loss passes score later.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tokenizers.decoders import DecodeStream
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from learner.distribution import sampling_logits, token_logprobs, uniform
from learner.model import cache_kwarg
from learner.sampling.kernels.gqa_sdpa import gqa_attention
from learner.sampling.kernels.kv_cache import (
    can_refill,
    decode_cache,
    merge_rows,
    repeat_prefix,
    trim_left,
)

#: Why a row stopped: its EOS, the caller's stop rule (a complete tool call or answer), its
#: budget.
EOS, STOP, LENGTH = "eos", "stop", "length"
#: The caller's stop rule: (row, its tokens so far) -> how many of them to keep, or None. It is
#: asked after each new token of a running row; the list is the caller's (read, not kept).
Stop = Callable[[int, list[int]], int | None]


#: Fewer leading tokens than this shared by every context are prefilled with each row: the
#: prefix's own forward would cost more than it saves.
MIN_SHARED_PREFIX = 8


@dataclass
class Decoded:
    """What ``decode`` sampled, one row per context (after ``repeat``)."""

    tokens: Tensor  # (n, W) sampled tokens, padding after each row's end
    logprobs: Tensor  # (n, W) their log-probs at sampling time, 0 after each row's end
    lengths: Tensor  # (n,) tokens kept per row
    stops: list[str]  # per row: EOS, STOP or LENGTH
    decoded: int  # positions decoded in all (finished rows still in the batch included)


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: list[str]
                   ) -> tuple[Tensor, Tensor]:
    """Tokenise already-templated prompts, left-padded."""
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def left_pad(contexts: list[list[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Token lists as left-padded ids and attention mask."""
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for i, ctx in enumerate(contexts):
        ids[i, width - len(ctx):] = torch.tensor(ctx, dtype=torch.long)
        mask[i, width - len(ctx):] = 1
    return ids, mask


def text_stop(tokenizer: PreTrainedTokenizerBase, end: Callable[[str], int | None]) -> Stop:
    """A ``Stop`` from a rule on text: ``end(text so far)`` is the index just after what ends
    the row (an env's complete tool call or answer), or None; the row keeps the tokens up to
    the one that completes it.

    Each row's text is kept as its tokens arrive (``RowText``: only the new token is decoded),
    and ``end`` is asked only when the text grew: O(L) decoding for a row of L tokens, where
    decoding every prefix again was O(L^2) (49.6 ms of CPU per 512-token row). A row whose
    tokens are not its last ones plus one (a new ``decode`` call, an episode's next turn) is
    read again from its first token."""
    texts: dict[int, RowText] = {}

    def stop(row: int, tokens: list[int]) -> int | None:
        text = texts.get(row)
        if text is None or len(tokens) != len(text.ends) + 1:
            text = texts[row] = RowText(tokenizer)
            for token in tokens:
                text.add(token)
        elif not text.add(tokens[-1]):
            return None  # the same text as when the rule last said None
        at = end(text.text)
        return None if at is None else text.tokens_through(at)
    return stop


class RowText:
    """One row's decoded text, token by token: tokenizers' streaming decoder (``DecodeStream``:
    a character split over several byte tokens shows once complete), or for a tokenizer
    without one, the text of a short window of the last tokens minus that of the window
    before the new token (as vLLM's incremental detokenizer). ``ends[k]``: the text's length
    after k + 1 tokens."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self._tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self._stream = DecodeStream(skip_special_tokens=True) if self._backend else None
        self._ids: list[int] = []
        self._prefix = self._read = 0  # the window: ids[prefix:read] decoded before the new ones
        self.text = ""
        self.ends: list[int] = []

    def add(self, token: int) -> bool:
        """Append ``token``; whether the text grew."""
        if self._stream is not None and self._backend is not None:
            chunk = self._stream.step(self._backend, token)
        else:
            chunk = self._window(token)
        if chunk:
            self.text += chunk
        self.ends.append(len(self.text))
        return bool(chunk)

    def _window(self, token: int) -> str | None:
        self._ids.append(token)
        decode = self._tokenizer.decode
        # One sequence of ids decodes to one string.
        before = str(decode(self._ids[self._prefix:self._read], skip_special_tokens=True))
        after = str(decode(self._ids[self._prefix:], skip_special_tokens=True))
        if len(after) <= len(before) or after.endswith("\ufffd"):  # an incomplete character
            return None
        self._prefix, self._read = self._read, len(self._ids)
        return after[len(before):]

    def tokens_through(self, at: int) -> int:
        """The fewest tokens whose text reaches index ``at`` (at least 1)."""
        return max(1, min(bisect.bisect_left(self.ends, at) + 1, len(self.ends)))


def eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Tensor:
    """Every token id that ends a turn: the tokenizer's EOS and the model's configured ones."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    ids.discard(None)
    return torch.tensor(sorted(ids), device=next(model.parameters()).device)


def sample_next(logits: Tensor, temperature: float, top_p: float, greedy: bool) -> Tensor:
    """One token per row from the sampling distribution (``distribution.sampling_logits``)."""
    if greedy:
        return logits.argmax(-1)
    probs = torch.softmax(sampling_logits(logits, temperature, top_p), dim=-1)
    # Inverse-CDF sampling: one uniform draw per row. Drawing one exponential per vocabulary
    # entry (argmax(p / E)) cost ~10x more, about a third of a decoding step on CPU, and
    # multinomial is slower still. The CDF is summed in float64 so that rounding moves no
    # measurable mass between tokens; a token of probability 0 has an empty interval.
    cdf = probs.double().cumsum_(-1)
    u = uniform(cdf.shape[0], cdf.dtype, cdf.device) * cdf[:, -1:]  # the draw's own generator
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)


@torch.no_grad()
def decode(model: PreTrainedModel, ids: Tensor, mask: Tensor, *, budgets: Tensor, eos: Tensor,
           pad_id: int, repeat: int = 1, temperature: float = 1.0, top_p: float = 1.0,
           greedy: bool = False, stop: Callable[[int, list[int]], int | None] | None = None,
           compact_fraction: float = 0.25, max_rows: int = 0) -> Decoded:
    """Sample a continuation of each left-padded context (``repeat`` rows per context).

    A row ends at an ``eos`` token (kept), at its budget (``budgets`` (n,), after ``repeat``),
    or where ``stop(row, tokens so far)`` returns how many of its tokens to keep.

    ``max_rows`` (with ``repeat`` 1): at most that many rows decode at once; contexts enter the
    batch as rows leave it (shortest first, each prefilled when it enters), so one call keeps a
    full batch where calls of ``max_rows`` contexts each would end with a few long rows running
    alone. Rows come back in the contexts' order.
    """
    was_training = model.training
    model.eval()  # also lets the KV cache work with gradient checkpointing enabled
    try:
        with gqa_attention(model):  # on CPU: attention without copies of the keys per head
            return _decode(model, ids, mask, budgets.to(ids.device), eos, pad_id, repeat,
                           temperature, top_p, greedy, stop, compact_fraction, max_rows)
    finally:
        model.train(was_training)


@dataclass
class SharedPrefix:
    """The first ``length`` tokens of every context, prefilled once: ``cache`` holds one row."""

    length: int
    cache: DynamicCache


def common_prefix(ids: Tensor, mask: Tensor) -> int:
    """How many leading tokens every left-padded context shares, at most the shortest one's
    length less one (each row prefills a token of its own, whose logits come next); 0 where a
    mask is not left padding then one run of tokens."""
    ids, mask = ids.cpu(), mask.cpu().bool()  # a few thousand ids: read once on the host
    lengths, width = mask.sum(-1), mask.shape[1]
    starts = width - lengths
    if not torch.equal(mask, torch.arange(width) >= starts.unsqueeze(-1)):
        return 0
    shortest = int(lengths.min()) if lengths.numel() else 0
    if shortest < 2:
        return 0
    heads = ids.gather(1, starts.unsqueeze(-1) + torch.arange(shortest))
    same = (heads == heads[:1]).all(0)
    return min(int(same.long().argmin()) if not bool(same.all()) else shortest, shortest - 1)


def _shared_prefix(model: PreTrainedModel, arg: str, ids: Tensor, mask: Tensor
                   ) -> SharedPrefix | None:
    """The contexts' common leading tokens prefilled once, or None where fewer than
    ``MIN_SHARED_PREFIX`` (or fewer than two contexts, or a cache without layers)."""
    if ids.shape[0] < 2 or not can_refill(DynamicCache()):
        return None
    n = common_prefix(ids, mask)
    if n < MIN_SHARED_PREFIX:
        return None
    start = ids.shape[1] - int(mask[0].sum())
    cache = DynamicCache()
    row = ids[:1, start:start + n]
    model(input_ids=row, attention_mask=torch.ones_like(row),
          position_ids=torch.arange(n, device=ids.device).unsqueeze(0), use_cache=True,
          logits_to_keep=1, **{arg: cache})
    return SharedPrefix(n, cache)


def _prefill(model: PreTrainedModel, cache: DynamicCache, arg: str, ids: Tensor, mask: Tensor,
             shared: SharedPrefix | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Prefill left-padded contexts into ``cache`` (padding no row uses is cut first): the
    last logits, the mask as the cache holds it, each row's next position.

    With ``shared``, the cache starts with its rows' copies of the shared prefix, and only
    each context's remaining tokens are prefilled, left-padded after the prefix (the mask's
    zeros between them are padding no query attends to). Runs of rows of like lengths
    (``like_lengths``) are prefilled apart and their caches merged: a prefill computes every
    padding position, where one forward over all the rows padded each to the longest."""
    if shared is not None:  # the prefix's tokens become padding of the remaining ones
        width = mask.shape[1]
        starts = width - mask.sum(-1, keepdim=True)
        mask = mask * (torch.arange(width, device=mask.device) >= starts + shared.length)
    runs = like_lengths(mask.sum(-1).tolist()) if can_refill(cache) else [(0, ids.shape[0])]
    parts = [_prefill_rows(model, cache if a == 0 else decode_cache(), arg, ids[a:b], mask[a:b],
                           shared) for a, b in runs]
    if len(parts) == 1:
        return parts[0][1:]
    merge_rows(cache, *(part[0] for part in parts[1:]))
    width = max(part[2].shape[1] for part in parts)
    return (torch.cat([part[1] for part in parts]),
            torch.cat([torch.nn.functional.pad(part[2], (width - part[2].shape[1], 0))
                       for part in parts]),
            torch.cat([part[3] for part in parts]))


def like_lengths(lengths: list[int], min_rows: int = 8, slack: float = 0.1
                 ) -> list[tuple[int, int]]:
    """Consecutive runs ``(start, end)`` of rows whose prefill pads little: a run ends where
    the next row would make its padding more than ``slack`` of its positions, once it holds
    ``min_rows`` rows and at least ``min_rows`` remain (a forward of few rows uses the
    hardware poorly)."""
    runs: list[tuple[int, int]] = []
    start, longest, total = 0, 0, 0
    for i, n in enumerate(lengths):
        wider, rows = max(longest, n), i - start + 1
        if (rows - 1 >= min_rows and len(lengths) - i >= min_rows
                and rows * wider - (total + n) > slack * rows * wider):
            runs.append((start, i))
            start, wider, total = i, n, 0
        longest, total = wider, total + n
    return [*runs, (start, len(lengths))]


def _prefill_rows(model: PreTrainedModel, cache: DynamicCache, arg: str, ids: Tensor,
                  mask: Tensor, shared: SharedPrefix | None
                  ) -> tuple[DynamicCache, Tensor, Tensor, Tensor]:
    """One prefill forward (``_prefill``'s, ``mask`` already without the shared prefix):
    the cache, last logits, mask and next positions."""
    first = int(mask.any(0).long().argmax())
    ids, mask = ids[:, first:], mask[:, first:]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    if shared is not None:
        repeat_prefix(cache, shared.cache, ids.shape[0])
        positions = positions + shared.length
        mask = torch.cat([mask.new_ones(mask.shape[0], shared.length), mask], dim=-1)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                logits_to_keep=1, **{arg: cache})
    return cache, out.logits[:, -1], mask, positions[:, -1] + 1


def _decode(model, ids, ctx_masks, budgets, eos, pad_id, repeat, temperature, top_p, greedy,
            stop, compact_fraction, max_rows) -> Decoded:
    cache, arg = decode_cache(), cache_kwarg(model)  # the cache is filled in place
    contexts = ids.shape[0]
    refill = 0 < max_rows < contexts and repeat == 1 and can_refill(cache)
    entered = max_rows if refill else contexts  # contexts in the batch so far
    # Refilled, contexts enter shortest first: each prefill then pads its prompts to a
    # similar length, where the given order padded a batch to its longest prompt.
    order = (ctx_masks.sum(-1).argsort(stable=True) if refill
             else torch.arange(contexts, device=ids.device))
    first_in = order[:entered]
    shared = _shared_prefix(model, arg, ids, ctx_masks)
    logits, mask, next_pos = _prefill(model, cache, arg, ids[first_in], ctx_masks[first_in],
                                      shared)
    if repeat > 1:
        cache.batch_repeat_interleave(repeat)
        logits = logits.repeat_interleave(repeat, 0)
    mask = mask.repeat_interleave(repeat, 0)
    next_pos = next_pos.repeat_interleave(repeat, 0)
    n, width = contexts * repeat, int(budgets.max())
    tokens = torch.full((n, width), pad_id, dtype=torch.long, device=ids.device)
    logprobs = torch.zeros((n, width), device=ids.device)
    lengths, stops = budgets.clone(), [LENGTH] * n
    done = torch.zeros(n, dtype=torch.bool, device=ids.device)
    # The output row of each cache row.
    rows = first_in if refill else torch.arange(entered * repeat, device=ids.device)
    start = torch.zeros(n, dtype=torch.long, device=ids.device)  # the step of a row's 1st token
    decoded, t = 0, 0
    sampled: list[list[int]] = [[] for _ in range(n)]  # each row's tokens, for ``stop``
    while True:
        nxt = sample_next(logits, temperature, top_p, greedy)
        cols = t - start[rows]  # each row's own token index
        # A finished row left in the batch decodes on, past its budget once a later row
        # keeps the loop going: only running rows' tokens are kept.
        live = ~done[rows]
        tokens[rows[live], cols[live]] = nxt[live]
        logprobs[rows[live], cols[live]] = token_logprobs(logits[live], nxt[live], temperature,
                                                          top_p)
        decoded += rows.numel()
        ended = live & torch.isin(nxt, eos)
        for r, c in zip(rows[ended].tolist(), cols[ended].tolist(), strict=True):
            lengths[r], stops[r] = c + 1, EOS
            done[r] = True
        if stop is not None:
            # One copy of the step's tokens to the host, appended to each row's list: a
            # slice per row and step copied O(L) tokens per call (and synced a GPU per row).
            for r, token, finished in zip(rows.tolist(), nxt.tolist(), done[rows].tolist(),
                                          strict=True):
                if finished:
                    continue
                sampled[r].append(token)
                keep = stop(r, sampled[r])
                if keep is not None:
                    lengths[r], stops[r] = keep, STOP
                    done[r] = True
        done[rows[cols + 1 >= budgets[rows]]] = True
        active = ~done[rows]
        waiting = contexts - entered
        if not waiting and not bool(active.any()):
            break
        t += 1
        free = max_rows - int(active.sum())
        if waiting and (free >= max(1.0, compact_fraction * max_rows) or not active.any()):
            new = order[entered:entered + min(free, waiting)]
            entered += new.numel()
            logits, rows, mask, next_pos, cache = _refill(
                model, cache, arg, nxt, active, rows, mask, next_pos, new, ids[new],
                ctx_masks[new], shared)
            start[new] = t
            continue
        logits, rows, mask, next_pos = _feed(model, cache, arg, nxt, active, rows, mask,
                                             next_pos, pad_id, compact_fraction)
    kept = torch.arange(width, device=ids.device) < lengths.unsqueeze(-1)
    return Decoded(tokens.masked_fill(~kept, pad_id), logprobs.masked_fill(~kept, 0.0),
                   lengths, stops, decoded)


def _refill(model: PreTrainedModel, cache: DynamicCache, arg: str, nxt: Tensor, active: Tensor,
            rows: Tensor, mask: Tensor, next_pos: Tensor, new: Tensor, new_ids: Tensor,
            new_mask: Tensor, shared: SharedPrefix | None = None
            ) -> tuple[Tensor, Tensor, Tensor, Tensor, DynamicCache]:
    """Drop the finished rows, feed the running ones their sampled tokens ``nxt``, and append
    the contexts ``new`` (output rows; their ids and mask) prefilled (after ``shared``'s
    copies): the next logits, rows, mask, positions and cache of the whole batch."""
    fresh = decode_cache()
    new_logits, new_mask, new_pos = _prefill(model, fresh, arg, new_ids, new_mask, shared)
    idx = active.nonzero().squeeze(-1)
    if idx.numel() == 0:
        return new_logits, new, new_mask, new_pos, fresh
    cache.batch_select_indices(idx)
    rows, nxt, mask, next_pos = rows[idx], nxt[idx], mask[idx], next_pos[idx]
    first = int(mask.any(0).long().argmax())  # positions no running row attends to are cut
    trim_left(cache, first)
    mask = torch.cat([mask[:, first:], mask.new_ones(mask.shape[0], 1)], dim=-1)
    out = model(input_ids=nxt.unsqueeze(-1), attention_mask=mask,
                position_ids=next_pos.unsqueeze(-1), use_cache=True, **{arg: cache})
    merge_rows(cache, fresh)
    width = max(mask.shape[1], new_mask.shape[1])
    mask = torch.cat([torch.nn.functional.pad(m, (width - m.shape[1], 0))
                      for m in (mask, new_mask)])
    return (torch.cat([out.logits[:, -1], new_logits]), torch.cat([rows, new]), mask,
            torch.cat([next_pos + 1, new_pos]), cache)


def _feed(model: PreTrainedModel, cache: DynamicCache, cache_arg: str, nxt: Tensor,
          active: Tensor, rows: Tensor, mask: Tensor, next_pos: Tensor, pad_id: int,
          compact_fraction: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Feed the sampled tokens ``nxt`` of the cache's rows (``active``: still decoding) and
    return the next logits with the surviving ``rows``, ``mask`` and ``next_pos``."""
    if (~active).sum() >= max(1.0, compact_fraction * rows.numel()):
        # Dropping finished rows copies the cache once but shrinks every later step.
        idx = active.nonzero().squeeze(-1)
        cache.batch_select_indices(idx)
        rows, nxt, mask, next_pos = rows[idx], nxt[idx], mask[idx], next_pos[idx]
    else:
        # Finished rows that stay in the batch keep decoding; their tokens are dropped later.
        nxt = torch.where(active, nxt, torch.full_like(nxt, pad_id))
    mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=-1)
    out = model(input_ids=nxt.unsqueeze(-1), attention_mask=mask,
                position_ids=next_pos.unsqueeze(-1), use_cache=True, **{cache_arg: cache})
    return out.logits[:, -1], rows, mask, next_pos + 1
