"""How far the sampling engine's log-probs are from the trainer's, on the tokens a step trains.

The ratio's "old" log-probs are the first loss pass's, computed by the trainer; the tokens were
sampled by the engine (the learner's own loop, or vLLM with its own kernels, batch shapes and,
on a GPU, bf16 weights), whose log-probs of the same tokens differ by float noise at best.
Logged every step (``rollout/*``): the mean and max absolute difference per token, and the
spread of the sequence-level ratio pi_trainer(y) / pi_engine(y), exp of the summed per-token
differences, which is the weight a sequence-level importance-sampling correction would give.
Samples drawn before the last optimizer step (``--async-steps 1``) are logged as
``rollout/stale_*`` instead: their difference mixes the mismatch with one step of policy drift,
which would read as an engine that samples badly.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from learner.training.distributed import Processes


class LogprobMismatch:
    """Summed over a step's micro-batches: the loss tokens' log-prob differences and the rows'
    sequence-level log-ratios."""

    def __init__(self, prefix: str = "rollout/") -> None:
        # rollout/stale_ for samples drawn before the last optimizer step (--async-steps 1):
        # their difference holds one step of policy drift besides the engine's mismatch.
        self.prefix = prefix
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

    def metrics(self, procs: Processes) -> dict[str, float]:
        """Over every process's tokens and completions (a collective: every process calls it),
        so that the mean is per token of the whole step and the max, min and spread are the
        step's, not an average of each process's; NaN when no token was measured."""
        parts = procs.gather_objects((self.tokens, self.abs_sum, self.abs_max,
                                      torch.cat(self.seq_log_ratios).tolist()
                                      if self.seq_log_ratios else []))
        tokens = sum(p[0] for p in parts)
        ratios = torch.tensor([r for p in parts for r in p[3]], dtype=torch.float64).exp()
        nan = math.nan
        figures = {
            "logprob_abs_diff_mean": sum(p[1] for p in parts) / tokens if tokens else nan,
            "logprob_abs_diff_max": max(p[2] for p in parts) if tokens else nan,
            "seq_ratio_std": float(ratios.std()) if ratios.numel() > 1 else nan,
            "seq_ratio_min": float(ratios.min()) if ratios.numel() else nan,
            "seq_ratio_max": float(ratios.max()) if ratios.numel() else nan,
        }
        return {self.prefix + k: v for k, v in figures.items()}
