"""The GRPO math as pure tensor functions (Shao et al. 2024, "DeepSeekMath", section 4.1).

Shapes: ``B`` sequences (completions), ``T`` completion tokens. Every function is stateless so
it can be checked by hand; the trainer only wires them together.

- Advantages (outcome supervision): ``A_i = (r_i - mean(r_group)) / (std(r_group) + eps)``,
  the same value for every token of completion ``i``.
- Surrogate: ``min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` with
  ``ratio = pi_theta / pi_old`` per token (``eps_high > eps_low`` is DAPO's clip-higher), or with
  GSPO's sequence-level ratio ``exp(mean_t log(pi_theta / pi_old))`` shared by every token of a
  completion (Zheng et al. 2025, ``importance_sampling_level="sequence"``).
- KL: the unbiased, always-positive k3 estimator
  ``pi_ref / pi_theta - log(pi_ref / pi_theta) - 1`` (DeepSeekMath eq. 4), weighted by ``beta``.
- Aggregation over the whole batch, groups with zero reward spread included (their KL term
  counts when ``beta > 0``): ``grpo`` averages tokens within each sequence, then over the
  batch's sequences (the paper); ``dr_grpo`` divides the token sum by the constant
  ``P * G * T_max`` (Liu et al. 2025); ``dapo`` averages over all tokens of the batch (Yu et al.
  2025). With ``beta == 0`` a zero-advantage row adds exactly nothing to the loss or gradient,
  so the trainer may skip computing it while the normalisers still count it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from learner.choices import IMPORTANCE_LEVELS, LOSS_TYPES, SCALE_REWARDS

__all__ = ["IMPORTANCE_LEVELS", "LOSS_TYPES", "SCALE_REWARDS"]  # re-exported with the math


def group_advantages(
    rewards: Tensor, groups: Tensor, scale: str = "group", eps: float = 1e-4,
    batch_std: float | None = None,
) -> Tensor:
    """Group-relative advantages for ``rewards`` (B,), where ``groups`` (B,) gives each sample's group.

    ``scale``: ``group`` divides by the group's std (GRPO), ``batch`` by the std of the whole
    batch (``batch_std`` when the batch spans processes), ``none`` not at all (Dr. GRPO). Stds
    are unbiased (as TRL computes them); a group with fewer than two samples has no baseline and
    gets advantage 0.
    """
    if scale not in SCALE_REWARDS:
        raise ValueError(f"scale must be one of {SCALE_REWARDS}, got {scale!r}")
    rewards = rewards.double()
    _, index = torch.unique(groups, return_inverse=True)
    n_groups = int(index.max()) + 1 if index.numel() else 0
    count = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, index, torch.ones_like(rewards))
    total = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, index, rewards)
    mean = total / count
    centred = rewards - mean[index]
    sq = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, index, centred**2)
    std = (sq / (count - 1).clamp(min=1)).sqrt()
    if scale == "group":
        centred = centred / (std[index] + eps)
    elif scale == "batch":
        if batch_std is None:
            batch_std = float(rewards.std()) if rewards.numel() > 1 else None
        centred = centred / (batch_std + eps if batch_std is not None else 1.0)
    centred = torch.where(count[index] > 1, centred, torch.zeros_like(centred))
    return centred.float()


def group_std(rewards: Tensor, groups: Tensor, n_groups: int) -> Tensor:
    """Unbiased reward std of each group ``0 .. n_groups-1`` (0 with fewer than two samples).

    A group with std 0 has all-zero advantages: it carries no policy-gradient signal.
    """
    out = torch.zeros(n_groups)
    for g in range(n_groups):
        r = rewards[groups == g].double()
        out[g] = r.std() if r.numel() > 1 else 0.0
    return out


def token_logprobs(logits: Tensor, tokens: Tensor, temperature: float = 1.0) -> Tensor:
    """log pi(token) for (B, T, V) logits and (B, T) tokens, without materialising log_softmax."""
    logits = _scaled(logits, temperature)
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy of the sampling distribution per position, (B, T)."""
    logp = torch.log_softmax(_scaled(logits, temperature), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _scaled(logits: Tensor, temperature: float) -> Tensor:
    # Dividing by 1 would copy the (positions, vocabulary) logits for nothing.
    logits = logits.float()
    return logits if temperature == 1.0 else logits / temperature


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = ref - logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def importance_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, level: str = "token") -> Tensor:
    """pi_theta / pi_old, (B, T): per token, or GSPO's length-normalised sequence ratio
    ``exp(sum_t m_t (logp - old_logp) / sum_t m_t)`` repeated over the sequence's tokens."""
    log_ratio = logp - old_logp
    if level == "token":
        return torch.exp(log_ratio)
    if level == "sequence":
        mask = mask.to(log_ratio.dtype)
        seq = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return torch.exp(seq).unsqueeze(-1).expand_as(log_ratio)
    raise ValueError(f"importance sampling level must be one of {IMPORTANCE_LEVELS}, got {level!r}")


def clipped_surrogate(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float, eps_high: float,
    mask: Tensor | None = None, level: str = "token",
) -> tuple[Tensor, Tensor]:
    """Per-token PPO objective (to maximise) and a mask of tokens where clipping was active.

    ``advantages`` is (B,) (one value per sequence) and is broadcast over tokens; ``mask`` (the
    completion tokens) is needed for the ``sequence`` level.
    """
    if mask is None:
        mask = torch.ones_like(logp)
    ratio = importance_ratio(logp, old_logp, mask, level)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return torch.minimum(unclipped, clipped), (clipped < unclipped)


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    loss_type: str,
    *,
    total_sequences: float,
    total_tokens: float,
    max_tokens: int,
) -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar normalised over the *whole* batch.

    The totals describe the full batch (every sequence of the step, flat groups included; for
    ``dr_grpo`` ``total_sequences`` is the configured P * G), so summing the results of its
    micro-batches, or of a subset of rows whose other rows contribute zero, gives exactly the
    full-batch loss.
    """
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        lengths = mask.sum(-1).clamp(min=1)
        return ((per_token * mask).sum(-1) / lengths).sum() / _positive(total_sequences)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / _positive(total_sequences * max_tokens)
    if loss_type == "dapo":
        return (per_token * mask).sum() / _positive(total_tokens)
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def _positive(n: float) -> float:
    # Per-process shares of a global count may be fractional (5 rows over 2 processes: 2.5);
    # an empty batch sums to zero anyway.
    return n if n > 0 else 1.0


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    ref_logp: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    beta: float,
    eps_low: float,
    eps_high: float,
    loss_type: str,
    total_sequences: float,
    total_tokens: float,
    max_tokens: int,
    importance_level: str = "token",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The GRPO loss to minimise, -(surrogate - beta * KL), and per-token diagnostics."""
    surrogate, clipped = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high, mask,
                                           importance_level)
    per_token = -surrogate
    kl = None
    if ref_logp is not None and beta != 0.0:
        kl = kl_k3(logp, ref_logp)
        per_token = per_token + beta * kl
    norm = {"total_sequences": total_sequences, "total_tokens": total_tokens,
            "max_tokens": max_tokens}
    loss = aggregate(per_token, mask, loss_type, **norm)
    stats = {"clipped": clipped, "kl": kl if kl is not None else torch.zeros_like(logp)}
    return loss, stats
