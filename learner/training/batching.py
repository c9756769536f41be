"""The rows a GRPO step trains on: the ``Batch`` the loss passes consume, and how a step's
samples become one (loss masks, which rows to compute, the normalisers).

The normalisers count every row of the step that has a loss token, flat groups included, as
each loss type's paper defines it; rows that add exactly nothing (see ``select_rows``) may be
left out of the computation while still counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from learner.sampling.rollout import Rollout


@dataclass
class Batch:
    """The rows a step computes (rows of a group are contiguous), and the size of the batch the
    loss is normalised over: ``n_sequences`` / ``n_tokens`` count every row of the step, also
    the zero-advantage rows that need no computing."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    loss_mask: Tensor
    advantages: Tensor
    groups: Tensor
    n_sequences: float = 0.0
    n_tokens: float = 0.0
    # The behaviour policy's log-probs of the completion tokens, as the sampling engine recorded
    # them (0 off the policy's tokens): ``update`` measures the loss passes' own against them,
    # and an importance-sampling correction for the engine/trainer mismatch would read them.
    sampling_logprobs: Tensor | None = None

    def __len__(self) -> int:
        return self.prompt_ids.shape[0]

    @property
    def tokens(self) -> int:
        return int(self.prompt_mask.sum() + self.completion_mask.sum())

    def split(self, n: int) -> list[Batch]:
        """Exactly ``min(n, len(self))`` micro-batches, of sizes that differ by at most one
        (processes must run the same number: each pass ends in collectives)."""
        n = min(n, len(self))
        bounds = [i * len(self) // n for i in range(n + 1)]
        return [self._rows(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]

    def positions(self, packed: bool = False) -> Tensor:
        """(B,) what each row costs a loss pass, in positions run through the model: its
        completion tokens, and its group's prompt for the first row of each group (the
        prompt runs once per group, ``forward._Prompts``); ``packed`` (``--packing``): its
        own prompt, for every row that has a completion token (a packed row runs its prompt;
        padding is never run)."""
        completion = self.completion_mask.sum(-1)
        if packed:
            return completion + (completion > 0) * self.prompt_mask.sum(-1)
        first = torch.ones_like(self.groups, dtype=torch.bool)
        first[1:] = self.groups[1:] != self.groups[:-1]
        return completion + first * self.prompt_mask.sum(-1)

    def parts_for(self, budget: int, packed: bool = False) -> int:
        """How many micro-batches ``split_by_tokens`` needs so that none holds more than
        ``budget`` positions (a row over the budget alone is a micro-batch of its own)."""
        return len(_pack(self.positions(packed).tolist(), budget)) if budget > 0 else 1

    def split_by_tokens(self, n: int, packed: bool = False) -> list[Batch]:
        """Exactly ``min(n, len(self))`` micro-batches of contiguous rows whose largest holds as
        few positions (``positions``) as ``n`` allows, each trimmed to its own longest prompt
        and completion. Peak memory then follows the budget, not P x G x (prompt +
        completion); the loss does not change (``grpo.aggregate`` normalises over the whole
        batch, and padding is masked). ``packed``: positions as ``--packing`` runs them."""
        n = min(n, len(self))
        cost = self.positions(packed).tolist()
        # The smallest largest-micro-batch that packs into n: a binary search over the budget.
        lo, hi = max(cost), sum(cost)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if len(_pack(cost, mid)) <= n else (mid + 1, hi)
        chunks = _pack(cost, lo)
        while len(chunks) < n:  # fewer rows per part than asked: halve the largest parts
            i = max(range(len(chunks)), key=lambda j: (len(chunks[j]) > 1, sum(
                cost[r] for r in chunks[j])))
            rows = chunks[i]
            chunks[i:i + 1] = [rows[:len(rows) // 2], rows[len(rows) // 2:]]
        return [self._rows(rows[0], rows[-1] + 1).trimmed() for rows in chunks]

    def trimmed(self) -> Batch:
        """The same rows without the prompt columns that are padding in every row (prompts are
        left-padded) and the completion columns past the longest completion."""
        keep_prompt = self.prompt_mask.any(0).nonzero()
        start = int(keep_prompt[0]) if len(keep_prompt) else self.prompt_mask.shape[1]
        keep_completion = self.completion_mask.any(0).nonzero()
        end = int(keep_completion[-1]) + 1 if len(keep_completion) else 0
        behaviour = self.sampling_logprobs
        return Batch(self.prompt_ids[:, start:], self.prompt_mask[:, start:],
                     self.completion_ids[:, :end], self.completion_mask[:, :end],
                     self.loss_mask[:, :end], self.advantages, self.groups, self.n_sequences,
                     self.n_tokens, None if behaviour is None else behaviour[:, :end])

    @classmethod
    def concat(cls, parts: list[Batch], n_sequences: float, n_tokens: float) -> Batch:
        """The rows of ``parts`` (CPU batches, from any process) one after another, prompts
        left-padded and completions right-padded to the widest (padding is masked, its ids 0),
        each part's groups numbered anew after the previous part's."""
        width = max(p.prompt_ids.shape[1] for p in parts)
        length = max(p.completion_ids.shape[1] for p in parts)
        fields: list[list[Tensor]] = [[] for _ in range(8)]
        offset = 0
        for p in parts:
            left, right = width - p.prompt_ids.shape[1], length - p.completion_ids.shape[1]
            behaviour = (p.sampling_logprobs if p.sampling_logprobs is not None
                         else torch.zeros(p.completion_ids.shape))
            for i, (t, pad) in enumerate(((p.prompt_ids, (left, 0)), (p.prompt_mask, (left, 0)),
                                          (p.completion_ids, (0, right)),
                                          (p.completion_mask, (0, right)),
                                          (p.loss_mask, (0, right)), (behaviour, (0, right)))):
                fields[i].append(torch.nn.functional.pad(t, pad))
            fields[6].append(p.advantages)
            _, runs = torch.unique_consecutive(p.groups, return_inverse=True)
            fields[7].append(runs + offset)
            offset += int(runs.max()) + 1 if len(runs) else 0
        (prompt_ids, prompt_mask, completion_ids, completion_mask, loss_mask, behaviour,
         advantages, groups) = (torch.cat(f) for f in fields)
        return cls(prompt_ids, prompt_mask, completion_ids, completion_mask, loss_mask,
                   advantages, groups, n_sequences, n_tokens, behaviour)

    def rows(self, a: int, b: int) -> Batch:
        """Rows ``a`` to ``b`` (exclusive)."""
        return self._rows(a, b)

    def _rows(self, a: int, b: int) -> Batch:
        return self._map(lambda t: t[a:b])

    def to(self, device: torch.device) -> Batch:
        return self._map(lambda t: t.to(device))

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Batch:
        """``fn`` of every tensor, the normalising sizes kept."""
        behaviour = self.sampling_logprobs
        return Batch(fn(self.prompt_ids), fn(self.prompt_mask), fn(self.completion_ids),
                     fn(self.completion_mask), fn(self.loss_mask), fn(self.advantages),
                     fn(self.groups), self.n_sequences, self.n_tokens,
                     None if behaviour is None else fn(behaviour))


def _pack(cost: list[int], budget: int) -> list[list[int]]:
    """Contiguous runs of row indices, each as long as fits in ``budget`` (greedy, which is
    optimal for contiguous runs: no plan with fewer runs exists); a row over the budget
    alone is a run of its own."""
    chunks: list[list[int]] = []
    total = 0
    for i, c in enumerate(cost):
        if not chunks or total + c > budget:
            chunks.append([])
            total = 0
        chunks[-1].append(i)
        total += c
    return chunks


@dataclass
class Selection:
    """A step's rows, by what they need: ``loss_rows`` have a loss token (their KL counts when
    beta > 0), ``learning_rows`` are those with a non-zero advantage too."""

    loss_mask: Tensor  # (B, T) for every row of the rollout
    loss_rows: Tensor  # (B,) bool
    learning_rows: Tensor  # (B,) bool
    n_sequences: float
    n_tokens: float


def select_rows(roll: Rollout, in_step: Tensor, advantages: Tensor, *,
                mask_truncated: bool) -> Selection:
    """``in_step``: the graded rows of the groups this step trains on; the loss mask is the
    rollout's ``action_mask`` where it has one (multi-turn)."""
    # Multi-turn rows attend to the observations but train only on the policy's own tokens.
    own = roll.completion_mask if roll.action_mask is None else roll.action_mask
    loss_mask = own * in_step.long().unsqueeze(-1)
    if mask_truncated:
        loss_mask = loss_mask * (~roll.truncated).long().unsqueeze(-1)
    loss_rows = loss_mask.sum(-1) > 0
    return Selection(loss_mask, loss_rows, loss_rows & (advantages != 0),
                     float(loss_rows.sum()), float(loss_mask.sum()))


def gather_rows(roll: Rollout, selection: Selection, keep: Tensor, advantages: Tensor,
                groups: Tensor) -> Batch:
    """The ``keep`` rows as a ``Batch``. A process with none still joins the others' gradient
    all-reduce, with its first row carrying no loss."""
    placeholder = not bool(keep.any())
    idx = (keep.new_zeros(1, dtype=torch.long) if placeholder
           else keep.nonzero().squeeze(-1))
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
        sampling_logprobs=roll.logprobs[idx],
    )
