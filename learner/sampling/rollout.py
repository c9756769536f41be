"""A step's sampled completions (``Rollout``), and single-turn sampling: G completions per prompt
in one batched call of a sampling engine (``engine``: the decoding loop, ``decoding.decode``, or
vLLM)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from learner.sampling.decoding import LENGTH, encode_prompts, text_stop
from learner.sampling.engine import SamplingEngine


@dataclass
class Rollout:
    """Left-padded prompts (B, Lp) and right-padded completions (B, T), B = prompts * group."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor  # 1 up to and including the EOS token
    truncated: Tensor  # (B,) bool: hit the token budget (or the turn limit) without ending
    texts: list[str]
    generated_tokens: int  # positions decoded, finished rows still in the batch included
    # (B, T) each sampled token's log-prob at sampling time, under the engine that sampled it
    # (the behaviour policy's), 0 elsewhere
    logprobs: Tensor
    # Multi-turn episodes (``episodes``): 1 on the tokens the policy sampled, 0 on the
    # observations between its turns; None means every completion token is the policy's.
    action_mask: Tensor | None = None
    transcripts: list[list[dict[str, str]]] | None = None  # the turns, with their roles

    @property
    def lengths(self) -> Tensor:
        return self.completion_mask.sum(-1)

    @property
    def policy_lengths(self) -> Tensor:
        """(B,) the tokens the policy sampled (tool outputs left out)."""
        return self.lengths if self.action_mask is None else self.action_mask.sum(-1)

    @staticmethod
    def concat(rollouts: list[Rollout], pad_id: int) -> Rollout:
        """The rows of several rollouts, in order, padded to one width."""
        if len(rollouts) == 1:
            return rollouts[0]

        def cat(name: str, value: int, left: bool = False) -> Tensor:
            return pad_cat([getattr(r, name) for r in rollouts], value, left)

        multi = all(r.action_mask is not None for r in rollouts)
        return Rollout(
            prompt_ids=cat("prompt_ids", pad_id, left=True),
            prompt_mask=cat("prompt_mask", 0, left=True),
            completion_ids=cat("completion_ids", pad_id),
            completion_mask=cat("completion_mask", 0),
            truncated=torch.cat([r.truncated for r in rollouts]),
            texts=[t for r in rollouts for t in r.texts],
            generated_tokens=sum(r.generated_tokens for r in rollouts),
            logprobs=cat("logprobs", 0),
            action_mask=cat("action_mask", 0) if multi else None,
            transcripts=[t for r in rollouts for t in r.transcripts or []] if multi else None,
        )


def pad_cat(tensors: list[Tensor], value: int, left: bool) -> Tensor:
    """(rows, width) tensors stacked by rows, padded with ``value`` on the left or right."""
    width = max(t.shape[1] for t in tensors)
    padded = []
    for t in tensors:
        pad = t.new_full((t.shape[0], width - t.shape[1]), value)
        padded.append(torch.cat([pad, t] if left else [t, pad], dim=1))
    return torch.cat(padded)


def generate(
    engine: SamplingEngine,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    *,
    group_size: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    compact_fraction: float = 0.25,
    answer_end: Callable[[str], int | None] | None = None,
    max_rows: int = 0,
) -> Rollout:
    """Sample ``group_size`` completions for each templated prompt; rows are prompt-major.
    ``engine`` decodes them (``HFEngine(model)``: the learner's own loop). A row stops at
    EOS, at ``max_new_tokens``, or where ``answer_end(its text)`` says its answer is complete
    (the env's ``answer_end``: what follows would not be graded). ``max_rows``: at most that
    many rows decode at once, prompts entering as rows finish (``decoding.decode``)."""
    device = engine.device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, prompts)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    budgets = torch.full((len(prompts) * group_size,), max_new_tokens, device=device)
    with engine.session():
        out = engine.decode(prompt_ids, prompt_mask, budgets=budgets,
                            eos=engine.eos_ids(tokenizer), pad_id=tokenizer.pad_token_id,
                            repeat=group_size, temperature=temperature, top_p=top_p,
                            greedy=greedy, compact_fraction=compact_fraction,
                            stop=text_stop(tokenizer, answer_end) if answer_end else None,
                            max_rows=max_rows)
    width = max(int(out.lengths.max()), 1)  # columns no completion uses are cut
    mask = (torch.arange(width, device=device) < out.lengths.unsqueeze(-1)).long()
    ids = out.tokens[:, :width]
    texts = tokenizer.batch_decode([row[:n] for row, n in zip(ids, out.lengths.tolist(),
                                                             strict=True)],
                                   skip_special_tokens=True)
    return Rollout(
        prompt_ids=prompt_ids.repeat_interleave(group_size, 0),
        prompt_mask=prompt_mask.repeat_interleave(group_size, 0),
        completion_ids=ids,
        completion_mask=mask,
        truncated=torch.tensor([s == LENGTH for s in out.stops], device=device),
        texts=texts,
        generated_tokens=out.decoded,
        logprobs=out.logprobs[:, :width],
    )
