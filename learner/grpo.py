"""The GRPO math as pure tensor functions (Shao et al. 2024, "DeepSeekMath", section 4.1).

Shapes: ``B`` sequences (completions), ``T`` completion tokens. Every function is stateless so
it can be checked by hand; the trainer only wires them together.

- Advantages (outcome supervision): ``A_i = (r_i - mean(r_group)) / (std(r_group) + eps)``,
  the same value for every token of completion ``i``.
- Surrogate: ``min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` with
  ``ratio = pi_theta / pi_old`` per token (``eps_high > eps_low`` is DAPO's clip-higher).
- KL: the unbiased, always-positive k3 estimator
  ``pi_ref / pi_theta - log(pi_ref / pi_theta) - 1`` (DeepSeekMath eq. 4), weighted by ``beta``.
- Aggregation: ``grpo`` averages tokens within each sequence, then sequences (the paper);
  ``dr_grpo`` divides the token sum by a constant ``B * T_max`` (Liu et al. 2025);
  ``dapo`` averages over all tokens of the batch (Yu et al. 2025).
"""

from __future__ import annotations

import torch
from torch import Tensor

SCALE_REWARDS = ("group", "batch", "none")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")


def group_advantages(
    rewards: Tensor, groups: Tensor, scale: str = "group", eps: float = 1e-4
) -> Tensor:
    """Group-relative advantages for ``rewards`` (B,), where ``groups`` (B,) gives each sample's group.

    ``scale``: ``group`` divides by the group's std (GRPO), ``batch`` by the std of the whole
    batch, ``none`` not at all (Dr. GRPO). Stds are unbiased (as TRL computes them); a group
    with fewer than two samples has no baseline and gets advantage 0.
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
        centred = centred / (rewards.std() + eps if rewards.numel() > 1 else 1.0)
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
    logits = logits.float() / temperature
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy of the sampling distribution per position, (B, T)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = ref - logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def clipped_surrogate(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float, eps_high: float
) -> tuple[Tensor, Tensor]:
    """Per-token PPO objective (to maximise) and a mask of tokens where clipping was active.

    ``advantages`` is (B,) (one value per sequence) and is broadcast over tokens.
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return torch.minimum(unclipped, clipped), (clipped < unclipped)


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    loss_type: str,
    *,
    total_sequences: int,
    total_tokens: int,
    max_tokens: int,
) -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar normalised over the *whole* batch.

    The totals describe the full batch, so summing the results of its micro-batches gives
    exactly the full-batch loss (gradient accumulation changes nothing).
    """
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        lengths = mask.sum(-1).clamp(min=1)
        return ((per_token * mask).sum(-1) / lengths).sum() / max(total_sequences, 1)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / max(total_sequences * max_tokens, 1)
    if loss_type == "dapo":
        return (per_token * mask).sum() / max(total_tokens, 1)
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


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
    total_sequences: int,
    total_tokens: int,
    max_tokens: int,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The GRPO loss to minimise, -(surrogate - beta * KL), and per-token diagnostics."""
    surrogate, clipped = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
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
