"""The GRPO math as pure tensor functions (Shao et al. 2024, "DeepSeekMath", section 4.1).

Shapes: ``B`` sequences (completions), ``T`` completion tokens, ``V`` the vocabulary. Every
function is stateless so it can be checked by hand; the trainer only wires them together.

- Sampling distribution: logits divided by the temperature, then cut to the top-p nucleus
  (Holtzman et al. 2020) and renormalised. The sampler draws from it and the loss scores under
  it, so the ratio's old and new log-probs are of the distribution actually sampled from.
- Rewards: DAPO's soft overlong punishment (Yu et al. 2025, eq. 13) adds a length penalty that
  falls linearly from 0 to -1 over the last ``L_cache`` tokens before ``L_max``.
- Advantages (outcome supervision): ``A_i = (r_i - mean(r_group)) / (std(r_group) + eps)``,
  the same value for every token of completion ``i``.
- Surrogate: ``min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` with
  ``ratio = pi_theta / pi_old`` per token (``eps_high > eps_low`` is DAPO's clip-higher), or with
  GSPO's sequence-level ratio ``exp(mean_t log(pi_theta / pi_old))`` shared by every token of a
  completion (Zheng et al. 2025, ``importance_sampling_level="sequence"``).
- CISPO (MiniMax-M1, Chen et al. 2025, eq. 4; TRL's ``loss_type="cispo"``): the importance
  weight is clipped, not the update: ``sg(min(ratio, 1 + eps_high)) * A * log pi_theta`` per
  token, ``sg`` a stop-gradient, no lower bound. Its gradient is ``min(ratio, 1 + eps_high) * A *
  grad log pi``: a token past PPO's clip (ratio > 1 + eps on A > 0, < 1 - eps on A < 0), whose
  gradient PPO's ``min`` zeroes, keeps one, weighted at most by the cap.
- GDPO-style multi-reward normalisation (``normalize_then_sum``, TRL's
  ``multi_objective_aggregation``): each named reward component is normalised within its group
  (``(c - mean) / (std + eps)``), the weighted sum of those is then normalised over the batch, so
  a component with a large scale or spread no longer drowns a small one.
- Engine/trainer mismatch (importance sampling, Yao et al. 2025, as TRL's
  ``vllm_importance_sampling_correction`` and verl's rollout IS): the tokens were sampled by an
  engine whose log-probs differ from the trainer's, so the policy-gradient term of each token is
  weighted by ``w = pi_trainer_old / pi_engine`` (per token), or each completion's by
  ``prod_t pi_trainer_old / pi_engine`` (per sequence), truncated into ``[C_min, C]`` or, in the
  masked modes, set to 0 outside it; detached, the KL term unweighted.
- KL: the unbiased, always-positive k3 estimator
  ``pi_ref / pi_theta - log(pi_ref / pi_theta) - 1`` (DeepSeekMath eq. 4), weighted by ``beta``.
- Aggregation over the whole batch, groups with zero reward spread included (their KL term
  counts when ``beta > 0``): ``grpo`` averages tokens within each sequence, then over the
  batch's sequences (the paper); ``dr_grpo`` divides the token sum by the constant ``P * G * L``
  (Liu et al. 2025; ``L`` from ``dr_grpo_max_tokens``); ``dapo`` averages over all tokens of the
  batch (Yu et al. 2025), and so does ``cispo`` (MiniMax-M1's eq. 4 divides by the batch's
  tokens). With ``beta == 0`` a zero-advantage row adds exactly nothing to the
  loss or gradient, so the trainer may skip computing it while the normalisers still count it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from learner.choices import IMPORTANCE_LEVELS, IS_MODES, LOSS_TYPES, SCALE_REWARDS


# -- rewards and advantages --------------------------------------------------------------------
def overlong_penalty(lengths: Tensor, max_tokens: int, cache: int) -> Tensor:
    """DAPO's soft overlong punishment of completions of ``lengths`` tokens (added to their
    reward): 0 up to ``max_tokens - cache``, then ``((max_tokens - cache) - length) / cache``,
    falling to -1 at ``max_tokens`` and staying there beyond it."""
    if cache <= 0:
        return torch.zeros(lengths.shape, dtype=torch.float32, device=lengths.device)
    free = max_tokens - cache
    return ((free - lengths.double()) / cache).clamp(min=-1.0, max=0.0).float()


class GroupMoments(NamedTuple):
    """Per group: how many samples, their mean reward and its unbiased std (0 below two)."""

    count: Tensor  # type: ignore[assignment]  # a field named like tuple.count, on purpose
    mean: Tensor
    std: Tensor


def group_moments(rewards: Tensor, groups: Tensor, n_groups: int) -> GroupMoments:
    """The moments of groups ``0 .. n_groups-1``, where ``groups`` (B,) gives each sample's
    group; a group with no sample has count 0. Stds are unbiased, as TRL computes them."""
    rewards = rewards.double()
    zeros = rewards.new_zeros(n_groups)  # on the rewards' device
    count = zeros.index_add(0, groups, torch.ones_like(rewards))
    # Sums are taken of the rewards less their group's smallest, so a group of equal rewards has
    # its value as mean and a std of exactly 0: summed as they are, eight rewards of 1.1 give a
    # mean off in the last bit and a std of 2e-16, and the group counts as having spread.
    low = zeros.scatter_reduce(0, groups, rewards, reduce="amin", include_self=False)
    shifted = rewards - low[groups]
    mean = low + zeros.index_add(0, groups, shifted) / count.clamp(min=1)
    sq = zeros.index_add(0, groups, (rewards - mean[groups]) ** 2)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), 0.0)
    return GroupMoments(count, mean, std)


def group_advantages(rewards: Tensor, groups: Tensor, moments: GroupMoments,
                     scale: str = "group", eps: float = 1e-4,
                     batch_std: float | None = None) -> Tensor:
    """Group-relative advantages of ``rewards`` (B,) given their groups' ``moments``.

    ``scale``: ``group`` divides by the group's std (GRPO), ``batch`` by the std of the whole
    batch (``batch_std`` when the batch spans processes), ``none`` not at all (Dr. GRPO). A
    group with fewer than two samples has no baseline and gets advantage 0.
    """
    if scale not in SCALE_REWARDS:
        raise ValueError(f"scale must be one of {SCALE_REWARDS}, got {scale!r}")
    centred = rewards.double() - moments.mean[groups]
    if scale == "group":
        centred = centred / (moments.std[groups] + eps)
    elif scale == "batch":
        if batch_std is None and rewards.numel() > 1:
            batch_std = float(rewards.double().std())
        centred = centred / (batch_std + eps if batch_std is not None else 1.0)
    return torch.where(moments.count[groups] > 1, centred, 0.0).float()


def group_normalized_sum(components: Tensor, weights: Tensor, groups: Tensor, n_groups: int,
                         eps: float = 1e-4) -> Tensor:
    """GDPO's first half, (B,) float64: each reward component of ``components`` (B, K)
    normalised within its group, ``(c_k - mean_g(c_k)) / (std_g(c_k) + eps)`` (unbiased std,
    as ``group_moments``), then summed with ``weights`` (K,). A group with fewer than two
    samples has no baseline: 0 for each of its components."""
    if components.dim() != 2 or weights.shape != components.shape[1:]:
        raise ValueError(f"components must be (B, K) and weights (K,), got "
                         f"{tuple(components.shape)} and {tuple(weights.shape)}")
    components = components.double()
    summed = components.new_zeros(components.shape[0])
    for k in range(components.shape[1]):
        m = group_moments(components[:, k], groups, n_groups)
        normalised = (components[:, k] - m.mean[groups]) / (m.std[groups] + eps)
        summed = summed + float(weights[k]) * torch.where(m.count[groups] > 1, normalised, 0.0)
    return summed


def normalize_then_sum(components: Tensor, weights: Tensor, groups: Tensor, n_groups: int,
                       eps: float = 1e-4,
                       batch_moments: tuple[float, float] | None = None) -> Tensor:
    """GDPO-style advantages (B,) from named reward components (B, K) and their weights (K,):
    ``group_normalized_sum``'s ``s``, normalised over the batch, ``(s - mean(s)) / (std(s) +
    eps)`` (unbiased std), as TRL's ``multi_objective_aggregation="normalize_then_sum"``.
    ``batch_moments``: (mean, std) of ``s`` over every process when the batch spans several."""
    summed = group_normalized_sum(components, weights, groups, n_groups, eps)
    if batch_moments is None:
        mean = float(summed.mean()) if summed.numel() else 0.0
        std = float(summed.std()) if summed.numel() > 1 else 0.0
    else:
        mean, std = batch_moments
    return ((summed - mean) / (std + eps)).float()


# -- the surrogate, the KL and the loss --------------------------------------------------------
#: Bounds before ``exp``, as verl sets them: a log-ratio (policy/old, ref/policy) is clamped to
#: +-LOG_RATIO_BOUND and k3 into [-K3_BOUND, K3_BOUND]. Unbounded, one overflowing token (a
#: padded position's garbage log-prob, a token the policy all but ruled out) is inf, and inf
#: times a zero advantage or a zero mask is NaN, which cancels the iteration on every process.
LOG_RATIO_BOUND = 20.0
K3_BOUND = 10.0


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = ref - logp,
    d clamped to +-LOG_RATIO_BOUND and the estimate to +-K3_BOUND."""
    d = (ref_logp - logp).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return (torch.exp(d) - d - 1).clamp(-K3_BOUND, K3_BOUND)


def importance_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, level: str = "token") -> Tensor:
    """pi_theta / pi_old, (B, T): per token, or GSPO's length-normalised sequence ratio
    ``exp(sum_t m_t (logp - old_logp) / sum_t m_t)`` repeated over the sequence's tokens. Each
    log-ratio is clamped to +-LOG_RATIO_BOUND before ``exp`` (so is the sequence's mean); off
    the mask it counts as 0."""
    if level == "token":
        return torch.exp((logp - old_logp).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND))
    if level == "sequence":
        mask = mask.to(logp.dtype)
        log_ratio = (logp - old_logp).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND) * mask
        seq = log_ratio.sum(-1) / mask.sum(-1).clamp(min=1)
        return torch.exp(seq).unsqueeze(-1).expand_as(logp)
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
    objective, low, high = _surrogate(ratio, advantages, eps_low, eps_high)
    return objective, low | high


def _surrogate(ratio: Tensor, advantages: Tensor, eps_low: float,
               eps_high: float) -> tuple[Tensor, Tensor, Tensor]:
    """The clipped objective and where each side of the clip acted: the low side where the
    ratio fell under 1 - eps_low on a negative advantage, the high side where it rose over
    1 + eps_high on a positive one (the only places min() picks the clipped term)."""
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    active = clipped < unclipped
    return torch.minimum(unclipped, clipped), active & (adv < 0), active & (adv > 0)


def cispo_surrogate(logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_high: float,
                    mask: Tensor | None = None, level: str = "token") -> tuple[Tensor, Tensor]:
    """Per-token CISPO objective (to maximise), ``sg(min(ratio, 1 + eps_high)) * A * logp``,
    and where the cap lowered the weight of a positive advantage (TRL's ``cispo_clip_ratio``).

    The weight is detached: the gradient is ``min(ratio, 1 + eps_high) * A * grad logp``, never
    0 where PPO's clip would silence the token. No lower bound (MiniMax-M1 sets none).
    """
    if mask is None:
        mask = torch.ones_like(logp)
    ratio = importance_ratio(logp, old_logp, mask, level)
    weight = torch.clamp(ratio, max=1 + eps_high).detach()
    adv = advantages.unsqueeze(-1)
    return weight * adv * logp, (ratio > 1 + eps_high) & (adv > 0)


def approx_kl(logp: Tensor, old_logp: Tensor) -> Tensor:
    """Per-token estimate of KL(pi_old || pi_theta) on tokens drawn from pi_old, CleanRL's
    ``approx_kl``: ``(r - 1) - log r`` with ``r = pi_theta / pi_old`` (k3, never negative),
    the log-ratio clamped to +-LOG_RATIO_BOUND as the surrogate's. Detached: a diagnostic of
    how far an iteration moved the policy from the one that drew the samples."""
    d = (logp.detach() - old_logp.detach()).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return torch.expm1(d) - d


def truncated_is_weights(trainer_logp: Tensor, engine_logp: Tensor, mask: Tensor,
                         level: str = "token", cap: float = 3.0,
                         cap_min: float = 0.0) -> tuple[Tensor, Tensor]:
    """Importance-sampling weights (B, T) for the engine/trainer mismatch, detached, and where
    the bounds acted (bool (B, T)), in one of TRL's four modes.

    The raw ratio is ``exp(trainer - engine)`` per token (``token``, ``token_mask``) or, per
    row, ``exp(sum_t m_t (trainer - engine))`` repeated over its tokens (``sequence``,
    ``sequence_mask``). Truncated modes clamp it into ``[cap_min, cap]``; masked modes set it
    to 0 outside that range (the token, or the whole completion, leaves the policy gradient).
    Off the ``mask`` the difference counts as 0 (the engine records nothing there; the loss
    ignores them).
    """
    if level not in IS_MODES:
        raise ValueError(f"is-correction level must be one of {IS_MODES}, got {level!r}")
    diff = (trainer_logp.detach() - engine_logp.to(trainer_logp)).masked_fill(~mask.bool(), 0.0)
    if level.startswith("sequence"):
        diff = diff.sum(-1, keepdim=True)
    raw = torch.exp(diff)  # an overflow to inf is out of range like any ratio above the cap
    outside = (raw > cap) | (raw < cap_min)
    if level.endswith("_mask"):
        weights = raw.masked_fill(outside, 0.0)
    else:
        weights = raw.clamp(min=cap_min, max=cap)
    return weights.expand_as(trainer_logp), outside.expand_as(trainer_logp)


def dr_grpo_max_tokens(max_new_tokens: int, max_turns: int = 1, max_episode_tokens: int = 0) -> int:
    """Dr. GRPO's ``L``, the most policy tokens one completion can hold: ``max_new_tokens``
    per turn over ``max_turns`` turns, or ``max_episode_tokens`` when that is set and smaller
    (it bounds the whole completion, tool outputs included)."""
    most = max_new_tokens * max(max_turns, 1)
    return min(most, max_episode_tokens) if max_episode_tokens else most


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
    if loss_type in ("dapo", "cispo"):
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
    is_weights: Tensor | None = None,
    kl_ratio: bool = False,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The GRPO loss to minimise, -(w * surrogate - beta * KL), and per-token diagnostics
    (where the clip acted, each side apart, the old->new ``approx_kl`` and the k3 KL). With
    ``loss_type="cispo"`` the surrogate is ``cispo_surrogate``'s (``eps_low`` unused) and
    ``clipped_high`` is where its cap lowered a weight.
    ``is_weights`` (B, T), from ``truncated_is_weights``, weight the surrogate alone: the KL is
    a penalty on the trainer's own policy, not an estimate under the engine's samples (as TRL
    applies it). None leaves the loss exactly as without a correction. ``kl_ratio``: the
    bias-corrected k3, ``ratio * k3`` with the surrogate's (differentiable) ratio, so that on
    samples drawn by another policy than pi_theta (stale ones, or any iteration after the
    first) the KL term estimates KL(pi_theta || pi_ref) under pi_theta (as TRL's
    ``use_bias_correction_kl``); off, k3 is averaged under the sampling policy, an
    approximation that is exact on-policy."""
    ratio = importance_ratio(logp, old_logp, mask, importance_level)
    if loss_type == "cispo":  # the weight clipped, not the update; no lower side
        surrogate, clipped_high = cispo_surrogate(logp, old_logp, advantages, eps_high, mask,
                                                  importance_level)
        clipped_low = torch.zeros_like(clipped_high)
    else:
        surrogate, clipped_low, clipped_high = _surrogate(ratio, advantages, eps_low, eps_high)
    per_token = -surrogate
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    kl = None
    if ref_logp is not None and beta != 0.0:
        kl = kl_k3(logp, ref_logp)
        per_token = per_token + beta * (ratio * kl if kl_ratio else kl)
    loss = aggregate(per_token, mask, loss_type, total_sequences=total_sequences,
                     total_tokens=total_tokens, max_tokens=max_tokens)
    stats = {"clipped": clipped_low | clipped_high, "clipped_low": clipped_low,
             "clipped_high": clipped_high, "approx_kl": approx_kl(logp, old_logp),
             "kl": kl if kl is not None else torch.zeros_like(logp)}
    return loss, stats
