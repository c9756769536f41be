"""How far the sampling engine's log-probs are from the trainer's, on the tokens a step trains.

The ratio's "old" log-probs are the first loss pass's, computed by the trainer; the tokens were
sampled by the engine (the learner's own loop, or vLLM with its own kernels, batch shapes and,
on a GPU, bf16 weights), whose log-probs of the same tokens differ by float noise at best.
Logged every step (``rollout/*``): the mean and max absolute difference per token, and the
spread of the sequence-level ratio pi_trainer(y) / pi_engine(y), exp of the summed per-token
differences, which is the weight a sequence-level importance-sampling correction would give.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


class LogprobMismatch:
    """Summed over a step's micro-batches: the loss tokens' log-prob differences and the rows'
    sequence-level log-ratios."""

    def __init__(self) -> None:
        self.tokens = 0
        self.abs_sum = 0.0
        self.abs_max = 0.0
        self.seq_log_ratios: list[Tensor] = []

    @torch.no_grad()
    def add(self, trainer: Tensor, engine: Tensor, loss_mask: Tensor) -> None:
        """(B, T) log-probs of the same tokens under the trainer and the sampling engine."""
        mask = loss_mask.bool()
        diff = (trainer.float() - engine.float().to(trainer.device)).masked_fill(~mask, 0.0)
        n = int(mask.sum())
        if n:
            self.tokens += n
            self.abs_sum += float(diff.abs().sum())
            self.abs_max = max(self.abs_max, float(diff.abs().max()))
        rows = mask.any(-1)
        self.seq_log_ratios.append(diff.sum(-1)[rows].double().cpu())

    def metrics(self) -> dict[str, float]:
        """The same keys whatever was measured (processes average them key by key); NaN when
        no token was."""
        ratios = torch.cat(self.seq_log_ratios).exp() if self.seq_log_ratios else torch.zeros(0)
        nan = math.nan
        return {
            "rollout/logprob_abs_diff_mean": self.abs_sum / self.tokens if self.tokens else nan,
            "rollout/logprob_abs_diff_max": self.abs_max if self.tokens else nan,
            "rollout/seq_ratio_std": float(ratios.std()) if ratios.numel() > 1 else nan,
            "rollout/seq_ratio_min": float(ratios.min()) if ratios.numel() else nan,
            "rollout/seq_ratio_max": float(ratios.max()) if ratios.numel() else nan,
        }
