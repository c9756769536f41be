"""Scoring completions under a model: logits for every completion token, one batched pass.

All G completions of a group share their prompt, so by default the prompt is run once per
group and its KV cache (with its autograd graph) is repeated for the group's rows; only the
completion tokens are then run per row. With chat-templated prompts that are longer than the
completions this removes most of the training FLOPs. Gradients flow through the shared prompt
exactly as through G separate copies.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import DynamicCache

from learner.model import cache_kwarg


def completion_logits(
    model: torch.nn.Module,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    completion_ids: Tensor,
    completion_mask: Tensor,
    groups: Tensor | None = None,
    *,
    share_prompts: bool = True,
) -> Tensor:
    """(B, T, V) logits; position t predicts ``completion_ids[:, t]``.

    ``prompt_ids`` are left-padded, ``completion_ids`` right-padded; rows with equal ``groups``
    have the same prompt. ``model`` may be wrapped (DDP) or a PEFT model.
    """
    if share_prompts and groups is not None:
        return _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids,
                                     completion_mask, groups)
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                logits_to_keep=completion_ids.shape[1] + 1, use_cache=False)
    return out.logits[:, :-1]


def _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask,
                          groups):
    _, inverse = torch.unique(groups, return_inverse=True)
    # First row of each group: its prompt stands for the group.
    first = torch.full((int(inverse.max()) + 1,), len(groups), device=groups.device)
    first = first.scatter_reduce(0, inverse, torch.arange(len(groups), device=groups.device),
                                 reduce="amin")
    p_ids, p_mask = prompt_ids[first], prompt_mask[first]
    positions = (p_mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    arg = cache_kwarg(model)
    out = model(input_ids=p_ids, attention_mask=p_mask, position_ids=positions, use_cache=True,
                logits_to_keep=1, **{arg: cache})
    first_logits = out.logits[:, -1][inverse]  # predicts the first completion token
    cache.batch_select_indices(inverse)  # differentiable gather: one prompt copy per row
    mask = torch.cat([p_mask[inverse], completion_mask], dim=1)
    start = positions[inverse, -1:] + 1
    c_positions = start + torch.arange(completion_ids.shape[1], device=start.device)
    out = model(input_ids=completion_ids, attention_mask=mask, position_ids=c_positions,
                use_cache=True, **{arg: cache})
    return torch.cat([first_logits.unsqueeze(1), out.logits[:, :-1]], dim=1)
