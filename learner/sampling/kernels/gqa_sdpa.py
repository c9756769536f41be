"""Grouped-query attention on CPU without copying the keys and values once per query head.

transformers' ``sdpa`` attention repeats every layer's keys and values to the query heads'
count (``repeat_kv``) whenever an attention mask is passed, which batched decoding always does
(left padding). On CPU that copy, and attention over the copy, measured ten times the cost of
the same product with torch's ``enable_gqa`` (a decoding step's attention at 64 rows, 9 query
and 3 key-value heads, 130 cached positions: 14.7 ms against 1.4 ms a layer), with bitwise
the same output. Its share of a step grows with the cache's width, so it weighed most on a
refilled held-out evaluation, where rows of different ages share one padded cache.

``gqa_attention(model)`` switches a CPU model on ``sdpa`` to ``GQA_SDPA`` for the decoding
loop only (the loss passes keep transformers' own path and its backward). The function is
``sdpa`` itself wherever that would not repeat the keys (another device, no mask, a position
bias, one head per key).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

try:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
except ImportError:  # transformers < 4.53: no registrable attention and masks
    AttentionInterface = None  # type: ignore[assignment,misc]  # the optional import's fallback

#: The attention implementation's registered name (its masks are ``sdpa``'s).
GQA_SDPA = "grpo_gqa_sdpa"


def gqa_sdpa_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                     value: torch.Tensor, attention_mask: torch.Tensor | None,
                     dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """``sdpa_attention_forward`` with ``enable_gqa`` where it would repeat the keys on CPU."""
    if (query.device.type != "cpu" or attention_mask is None or key.shape[1] == query.shape[1]
            or kwargs.get("position_bias") is not None or kwargs.get("cache") is not None
            or kwargs.get("output_attentions")):
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, is_causal=is_causal,
                                      **kwargs)
    # With a mask, sdpa's own path is not causal either (the mask holds the causality).
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
        is_causal=False, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


if AttentionInterface is not None:
    AttentionInterface.register(GQA_SDPA, gqa_sdpa_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_SDPA, sdpa_mask)


@contextlib.contextmanager
def gqa_attention(model: torch.nn.Module) -> Iterator[None]:
    """Inside: ``model`` (on CPU, with ``sdpa`` attention) attends through ``GQA_SDPA``."""
    config = getattr(model, "config", None)
    params = next(model.parameters(), None)
    if AttentionInterface is None or config is None or params is None or params.device.type != "cpu" \
            or getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    config._attn_implementation = GQA_SDPA
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
