"""Batched sampling of G completions per prompt, written for small models on CPU as much as GPUs.

One call generates all P*G sequences of a step. Compared with ``model.generate`` on the
repeated prompts it saves work in two places that dominate on CPU:

- each distinct prompt is prefilled once and its KV cache repeated G times;
- finished sequences leave the batch (their cache rows are dropped), so late decoding steps
  only pay for the completions still running instead of the whole padded batch;
- on CPU the weights are packed once for oneDNN (``onednn_linear.packed_weights``) rather than
  reordered by every product of every decoding step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from learner.kv_cache import decode_cache
from learner.model import cache_kwarg
from learner.onednn_linear import packed_weights


@dataclass
class Rollout:
    """Left-padded prompts (B, Lp) and right-padded completions (B, T), B = prompts * group."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor  # 1 up to and including the EOS token
    truncated: Tensor  # (B,) bool: hit max_new_tokens without EOS
    texts: list[str]
    generated_tokens: int
    # Multi-turn episodes (learner.episodes): 1 on the tokens the policy sampled, 0 on the
    # observations between its turns; None means every completion token is the policy's.
    action_mask: Tensor | None = None
    transcripts: list[list[dict[str, str]]] | None = None  # the turns, with their roles

    @property
    def lengths(self) -> Tensor:
        return self.completion_mask.sum(-1)


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, prompts: list[str]
) -> tuple[Tensor, Tensor]:
    """Tokenise already-templated prompts, left-padded."""
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def _sample(logits: Tensor, temperature: float, top_p: float, greedy: bool) -> Tensor:
    if greedy:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (always at least the top token).
        drop = sorted_probs.cumsum(-1) - sorted_probs > top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    # Inverse-CDF sampling: one uniform draw per row. Drawing one exponential per vocabulary
    # entry (argmax(p / E)) cost ~10x more, about a third of a decoding step on CPU, and
    # multinomial is slower still. The CDF is summed in float64 so that rounding moves no
    # measurable mass between tokens; a token of probability 0 has an empty interval.
    cdf = probs.double().cumsum_(-1)
    u = torch.rand(cdf.shape[0], 1, dtype=cdf.dtype, device=cdf.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    *,
    group_size: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    compact_fraction: float = 0.25,
) -> Rollout:
    """Sample ``group_size`` completions for each templated prompt; rows are prompt-major."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, prompts)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id
    was_training = model.training
    model.eval()  # also lets the KV cache work with gradient checkpointing enabled
    try:
        with packed_weights(model):
            positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
            cache = decode_cache()  # filled in place by every forward call
            cache_arg = cache_kwarg(model)
            out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions,
                        use_cache=True, logits_to_keep=1, **{cache_arg: cache})
            logits = out.logits[:, -1]
            if group_size > 1:
                cache.batch_repeat_interleave(group_size)
                logits = logits.repeat_interleave(group_size, 0)
            mask = prompt_mask.repeat_interleave(group_size, 0)
            next_pos = positions[:, -1].repeat_interleave(group_size, 0) + 1
            batch = mask.shape[0]
            tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
            done = torch.zeros(batch, dtype=torch.bool, device=device)
            rows = torch.arange(batch, device=device)  # which output row each cache row feeds
            generated = 0
            for t in range(max_new_tokens):
                nxt = _sample(logits, temperature, top_p, greedy)
                tokens[rows, t] = nxt
                generated += rows.numel()
                done[rows[torch.isin(nxt, eos_ids)]] = True
                if t == max_new_tokens - 1 or bool(done.all()):
                    break
                logits, rows, mask, next_pos = decode_step(
                    model, cache, cache_arg, nxt, ~done[rows], rows, mask, next_pos,
                    pad_id=pad_id, compact_fraction=compact_fraction)
    finally:
        model.train(was_training)
    completion_ids, completion_mask, truncated = _trim(tokens, eos_ids, pad_id)
    texts = tokenizer.batch_decode(
        [ids[m.bool()] for ids, m in zip(completion_ids, completion_mask, strict=True)],
        skip_special_tokens=True,
    )
    return Rollout(
        prompt_ids=prompt_ids.repeat_interleave(group_size, 0),
        prompt_mask=prompt_mask.repeat_interleave(group_size, 0),
        completion_ids=completion_ids,
        completion_mask=completion_mask,
        truncated=truncated,
        texts=texts,
        generated_tokens=generated,
    )


def decode_step(model: PreTrainedModel, cache: DynamicCache, cache_arg: str, nxt: Tensor,
                active: Tensor, rows: Tensor, mask: Tensor, next_pos: Tensor, *, pad_id: int,
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


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Tensor:
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    ids.discard(None)
    return torch.tensor(sorted(ids), device=next(model.parameters()).device)


def _trim(tokens: Tensor, eos_ids: Tensor, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Mask everything after the first EOS and cut columns no completion uses."""
    is_eos = torch.isin(tokens, eos_ids)
    has_eos = is_eos.any(-1)
    first = torch.where(has_eos, is_eos.int().argmax(-1), tokens.shape[1])
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    mask = positions.unsqueeze(0) < torch.where(has_eos, first + 1, first).unsqueeze(-1)
    width = max(int(mask.sum(-1).max()), 1)
    tokens = tokens.masked_fill(~mask, pad_id)[:, :width]
    return tokens, mask[:, :width].long(), ~has_eos
