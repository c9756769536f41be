"""The rows a GRPO step trains on: the ``Batch`` the loss passes consume, and how a step's
rollouts become one (rollouts merged, rows selected, normalisers counted).

The normalisers count every valid row of the step, flat groups included, as each loss type's
paper defines it; only with ``beta == 0`` are zero-advantage rows left out of the computation
(they add exactly nothing), while still counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from learner.rollout import Rollout


@dataclass
class Batch:
    """The rows a step computes (rows of a group are contiguous), and the size of the batch the
    loss is normalised over: ``n_sequences`` / ``n_tokens`` count every row of the step, also
    the zero-advantage rows that need no computing (``beta == 0``)."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    loss_mask: Tensor
    advantages: Tensor
    groups: Tensor
    n_sequences: float = 0.0
    n_tokens: float = 0.0

    def __len__(self) -> int:
        return self.prompt_ids.shape[0]

    @property
    def tokens(self) -> int:
        return int(self.prompt_mask.sum() + self.completion_mask.sum())

    def split(self, n: int) -> list[Batch]:
        size = math.ceil(len(self) / n)
        return [Batch(*(t[i:i + size] for t in self._tensors()), self.n_sequences, self.n_tokens)
                for i in range(0, len(self), size)]

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device) for t in self._tensors()), self.n_sequences, self.n_tokens)

    def _tensors(self) -> tuple[Tensor, ...]:
        return (self.prompt_ids, self.prompt_mask, self.completion_ids, self.completion_mask,
                self.loss_mask, self.advantages, self.groups)


def pad_cat(tensors: list[Tensor], value: int, left: bool) -> Tensor:
    width = max(t.shape[1] for t in tensors)
    padded = []
    for t in tensors:
        pad = t.new_full((t.shape[0], width - t.shape[1]), value)
        padded.append(torch.cat([pad, t] if left else [t, pad], dim=1))
    return torch.cat(padded)


def merge_rollouts(rollouts: list[Rollout], pad_id: int) -> Rollout:
    if len(rollouts) == 1:
        return rollouts[0]
    return Rollout(
        prompt_ids=pad_cat([r.prompt_ids for r in rollouts], pad_id, left=True),
        prompt_mask=pad_cat([r.prompt_mask for r in rollouts], 0, left=True),
        completion_ids=pad_cat([r.completion_ids for r in rollouts], pad_id, left=False),
        completion_mask=pad_cat([r.completion_mask for r in rollouts], 0, left=False),
        truncated=torch.cat([r.truncated for r in rollouts]),
        texts=[t for r in rollouts for t in r.texts],
        generated_tokens=sum(r.generated_tokens for r in rollouts),
        action_mask=None if any(r.action_mask is None for r in rollouts)
        else pad_cat([r.action_mask for r in rollouts], 0, left=False),
        transcripts=None if any(r.transcripts is None for r in rollouts)
        else [t for r in rollouts for t in r.transcripts],
    )


@dataclass
class Selection:
    """Which rows of a step to compute (``keep``), their loss mask, and the normalisers."""

    keep: Tensor  # (B,) bool
    loss_mask: Tensor  # (B, T) for every row of the rollout
    n_sequences: float
    n_tokens: float


def select_rows(roll: Rollout, in_step: Tensor, advantages: Tensor, *, beta: float,
                mask_truncated: bool) -> Selection:
    """``in_step``: the valid rows of the groups this step trains on; the loss mask is the
    rollout's ``action_mask`` where it has one (multi-turn). Rows with no loss token
    (all masked) are never computed; with ``beta == 0`` neither are zero-advantage rows."""
    # Multi-turn rows attend to the observations but train only on the policy's own tokens.
    own = roll.completion_mask if roll.action_mask is None else roll.action_mask
    loss_mask = own * in_step.long().unsqueeze(-1)
    if mask_truncated:
        loss_mask = loss_mask * (~roll.truncated).long().unsqueeze(-1)
    has_tokens = loss_mask.sum(-1) > 0
    keep = has_tokens & (advantages != 0) if beta == 0 else has_tokens
    return Selection(keep, loss_mask, float(has_tokens.sum()), float(loss_mask.sum()))


def gather_rows(roll: Rollout, selection: Selection, advantages: Tensor, groups: Tensor, *,
                placeholder: bool = False) -> Batch:
    """The kept rows as a ``Batch``; ``placeholder``: rows that carry no loss (a process with
    nothing to train still joins the others' gradient all-reduce)."""
    idx = selection.keep.nonzero().squeeze(-1)
    loss_mask = selection.loss_mask[idx]
    if placeholder:
        loss_mask = torch.zeros_like(loss_mask)
    return Batch(
        prompt_ids=roll.prompt_ids[idx],
        prompt_mask=roll.prompt_mask[idx],
        completion_ids=roll.completion_ids[idx],
        completion_mask=roll.completion_mask[idx],
        loss_mask=loss_mask,
        advantages=advantages[idx],
        groups=groups[idx],
        n_sequences=selection.n_sequences,
        n_tokens=selection.n_tokens,
    )
