"""The GRPO math against values computed by hand."""

import math

import pytest
import torch

from learner import distribution
from learner.choices import LOSS_TYPES
from learner.evaluation.heldout import pass_at_k
from learner.training import grpo


def _advantages(rewards, groups, scale="group", **kw):
    moments = grpo.group_moments(rewards, groups, int(groups.max()) + 1)
    return grpo.group_advantages(rewards, groups, moments, scale, **kw)


def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv = _advantages(rewards, groups, "group", eps=0.0)
    # group 0: mean 0.5, unbiased std sqrt(1/3); group 1: mean 2.75, std 1.5
    s0 = math.sqrt(1 / 3)
    expected = [0.5 / s0, -0.5 / s0, -0.5 / s0, 0.5 / s0, -0.5, -0.5, -0.5, 1.5]
    assert adv.tolist() == pytest.approx(expected, rel=1e-5)


def test_group_advantages_batch_and_none_scaling():
    rewards = torch.tensor([1.0, 0.0, 3.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    none = _advantages(rewards, groups, "none")
    assert none.tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])
    batch = _advantages(rewards, groups, "batch", eps=0.0)
    std = float(torch.tensor([1.0, 0.0, 3.0, 1.0]).std())  # 1.2583
    assert batch.tolist() == pytest.approx([0.5 / std, -0.5 / std, 1 / std, -1 / std], rel=1e-5)


def test_zero_variance_and_singleton_groups_get_zero_advantage():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.3])
    groups = torch.tensor([0, 0, 0, 2])  # group 1 has no sample at all
    adv = _advantages(rewards, groups)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_token_logprobs_match_log_softmax():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 11)
    tokens = torch.randint(0, 11, (2, 3))
    want = torch.log_softmax(logits / 0.7, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(distribution.token_logprobs(logits, tokens, 0.7), want, atol=1e-6)


def test_entropy_of_uniform_is_log_vocab():
    assert distribution.token_entropy(torch.zeros(1, 2, 8))[0].tolist() == pytest.approx([math.log(8)] * 2)


def test_kl_k3_by_hand():
    logp = torch.tensor([math.log(0.5), math.log(0.2)])
    ref = torch.tensor([math.log(0.25), math.log(0.2)])
    # ratio r = pi_ref / pi = 0.5: r - log r - 1 = 0.5 + log 2 - 1
    assert grpo.kl_k3(logp, ref).tolist() == pytest.approx([0.5 + math.log(2) - 1, 0.0])


def test_clipped_surrogate_clips_asymmetrically():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.25]]))
    adv_pos = torch.tensor([1.0])
    obj, clipped = grpo.clipped_surrogate(logp, old, adv_pos, eps_low=0.2, eps_high=0.28)
    # A > 0: min(r, clip(r)) -> [1.28, 0.5, 1.1, 1.25]
    assert obj[0].tolist() == pytest.approx([1.28, 0.5, 1.1, 1.25], rel=1e-5)
    assert clipped.tolist() == [[True, False, False, False]]
    obj, clipped = grpo.clipped_surrogate(logp, old, -adv_pos, eps_low=0.2, eps_high=0.28)
    # A < 0: min(-r, -clip(r)) -> [-1.5, -0.8, -1.1, -1.25]
    assert obj[0].tolist() == pytest.approx([-1.5, -0.8, -1.1, -1.25], rel=1e-5)
    assert clipped.tolist() == [[False, True, False, False]]


def test_aggregate_loss_types_by_hand():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    norm = {"total_sequences": 2, "total_tokens": 4, "max_tokens": 5}
    assert float(grpo.aggregate(per_token, mask, "grpo", **norm)) == pytest.approx((2 + 4) / 2)
    assert float(grpo.aggregate(per_token, mask, "dapo", **norm)) == pytest.approx(10 / 4)
    assert float(grpo.aggregate(per_token, mask, "dr_grpo", **norm)) == pytest.approx(10 / 10)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_micro_batches_sum_to_the_full_batch_loss(loss_type):
    torch.manual_seed(1)
    per_token, mask = torch.randn(6, 5), (torch.rand(6, 5) > 0.3).long()
    norm = {"total_sequences": 6, "total_tokens": int(mask.sum()), "max_tokens": 5}
    full = grpo.aggregate(per_token, mask, loss_type, **norm)
    parts = sum(grpo.aggregate(per_token[i:i + 2], mask[i:i + 2], loss_type, **norm)
                for i in range(0, 6, 2))
    assert float(parts) == pytest.approx(float(full), rel=1e-6)


def test_grpo_loss_at_ratio_one_is_minus_mean_advantage_plus_kl():
    logp = torch.log(torch.tensor([[0.5, 0.5], [0.25, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.25], [0.25, 0.25]]))
    adv = torch.tensor([1.0, -0.5])
    mask = torch.ones(2, 2)
    loss, _ = grpo.grpo_loss(logp, logp, ref, adv, mask, beta=0.1, eps_low=0.2, eps_high=0.2,
                             loss_type="grpo", total_sequences=2, total_tokens=4, max_tokens=2)
    kl0 = 0.5 + math.log(2) - 1
    assert float(loss) == pytest.approx(-(1.0 - 0.5) / 2 + 0.1 * kl0 / 2, rel=1e-5)


def test_policy_gradient_pushes_up_advantaged_tokens():
    logits = torch.zeros(1, 1, 3, requires_grad=True)
    tokens = torch.tensor([[1]])
    logp = distribution.token_logprobs(logits, tokens)
    loss, _ = grpo.grpo_loss(logp, logp.detach(), None, torch.tensor([1.0]), torch.ones(1, 1),
                             beta=0.0, eps_low=0.2, eps_high=0.2, loss_type="grpo",
                             total_sequences=1, total_tokens=1, max_tokens=1)
    loss.backward()
    # d(-log softmax_1)/d logits = softmax - onehot = [1/3, -2/3, 1/3]
    assert logits.grad.flatten().tolist() == pytest.approx([1 / 3, -2 / 3, 1 / 3], rel=1e-5)


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 4, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_group_moments_by_hand():
    rewards = torch.tensor([1.0, 0.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2])
    count, mean, std = grpo.group_moments(rewards, groups, 4)
    assert count.tolist() == [2, 2, 1, 0]
    assert mean.tolist() == pytest.approx([0.5, 2.0, 5.0, 0.0])
    assert std.tolist() == pytest.approx([math.sqrt(0.5), 0.0, 0.0, 0.0])


def test_a_group_of_equal_rewards_has_no_spread_whatever_their_float_sum():
    # Eight rewards of 1.1 (the code env's passed + format) sum to 8.799999999999999 in
    # float64: a mean taken from that sum is off in the last bit and gave a std of 2.4e-16, so
    # the group counted as a signal group and its advantages were ~1e-12 instead of 0.
    rewards = torch.tensor([1.1] * 8 + [0.1, 1.1, 1.1, 1.1], dtype=torch.float64)
    groups = torch.tensor([0] * 8 + [1] * 4)
    count, mean, std = grpo.group_moments(rewards, groups, 2)
    assert mean[0].item() == 1.1 and std[0].item() == 0.0
    assert mean[1].item() == pytest.approx(0.85) and std[1].item() == pytest.approx(0.5)
    adv = grpo.group_advantages(rewards, groups, grpo.group_moments(rewards, groups, 2))
    assert adv[:8].tolist() == [0.0] * 8


def test_dapo_soft_overlong_punishment_by_hand():
    # L_max 10, L_cache 4: free up to 6 tokens, then -(length - 6) / 4, -1 from 10 on.
    lengths = torch.tensor([0, 5, 6, 7, 8, 9, 10, 11, 40])
    penalty = grpo.overlong_penalty(lengths, max_tokens=10, cache=4)
    assert penalty.tolist() == pytest.approx([0, 0, 0, -0.25, -0.5, -0.75, -1, -1, -1])
    assert grpo.overlong_penalty(lengths, max_tokens=10, cache=0).tolist() == [0.0] * 9


def test_top_p_logprobs_and_entropy_are_of_the_renormalised_nucleus():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    z = sum(math.exp(x) for x in (2.0, 1.0, 0.0, -1.0))
    # probs 0.644, 0.237, 0.087, 0.032: the nucleus of 0.8 is the first two tokens (the mass
    # above the second is 0.644 <= 0.8, above the third 0.881 > 0.8).
    assert math.exp(2) / z == pytest.approx(0.6439, abs=1e-4)
    nucleus = math.exp(2) + math.exp(1)
    tokens = torch.tensor([[0], [1], [2]]).view(3)
    got = distribution.token_logprobs(logits.expand(3, 4), tokens, temperature=1.0, top_p=0.8)
    # Token 2 lies outside the nucleus: scored, it is kept in the support (the sampled token).
    want = [2 - math.log(nucleus), 1 - math.log(nucleus), 0 - math.log(nucleus + 1)]
    assert got.tolist() == pytest.approx(want, rel=1e-6)
    p0, p1 = math.exp(2) / nucleus, math.exp(1) / nucleus
    entropy = distribution.token_entropy(logits, top_p=0.8)
    assert entropy.tolist() == pytest.approx([-(p0 * math.log(p0) + p1 * math.log(p1))])
    # At temperature 2 the logits halve: probs 0.455, 0.276, 0.167, 0.102; 0.8 keeps three.
    scaled = distribution.sampling_logits(logits, temperature=2.0, top_p=0.8)
    assert scaled.tolist() == [[1.0, 0.5, 0.0, float("-inf")]]
    assert distribution.sampling_logits(logits, 1.0, 1.0).tolist() == logits.tolist()


def test_gspo_clips_the_sequence_ratio_at_the_papers_range():
    # Two completions of two tokens; token ratios (1.5, 0.5) and (1.0002, 1.0002).
    old = torch.zeros(2, 2)
    logp = torch.log(torch.tensor([[1.5, 0.5], [1.0002, 1.0002]]))
    mask = torch.ones(2, 2)
    seq = grpo.importance_ratio(logp, old, mask, "sequence")
    assert seq[0].tolist() == pytest.approx([math.sqrt(0.75)] * 2, rel=1e-6)
    adv = torch.tensor([-1.0, 1.0])
    obj, clipped = grpo.clipped_surrogate(logp, old, adv, 3e-4, 4e-4, mask, "sequence")
    # A < 0, ratio 0.866 < 1 - 3e-4: clipped to -(1 - 3e-4) on every token of the sequence.
    # A > 0, ratio 1.0002 < 1 + 4e-4: not clipped.
    assert obj[0].tolist() == pytest.approx([-(1 - 3e-4)] * 2, rel=1e-6)
    assert obj[1].tolist() == pytest.approx([1.0002] * 2, rel=1e-6)
    assert clipped.tolist() == [[True, True], [False, False]]
    # At the token level the same first completion clips only its token of ratio 0.5.
    _, per_token = grpo.clipped_surrogate(logp, old, adv, 3e-4, 4e-4, mask, "token")
    assert per_token[0].tolist() == [False, True]


def test_dr_grpo_constant_is_the_completion_budget():
    assert grpo.dr_grpo_max_tokens(48) == 48
    assert grpo.dr_grpo_max_tokens(96, max_turns=3) == 288  # T per turn, K turns
    assert grpo.dr_grpo_max_tokens(96, max_turns=3, max_episode_tokens=320) == 288
    assert grpo.dr_grpo_max_tokens(96, max_turns=4, max_episode_tokens=320) == 320


def _is_case():
    """Two completions, the second with a padded last token (engine log-prob 0 there)."""
    trainer = torch.log(torch.tensor([[0.5, 0.2, 0.3], [0.6, 0.3, 0.9]]))
    engine = torch.log(torch.tensor([[0.25, 0.4, 0.1], [0.5, 0.6, 1.0]]))
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    return trainer, engine, mask


def test_truncated_is_weights_by_hand():
    trainer, engine, mask = _is_case()
    # pi_trainer / pi_engine per token: row 0 (2, 0.5, 3), row 1 (1.2, 0.5, and 1 off the mask).
    weights, cut = grpo.truncated_is_weights(trainer, engine, mask, "token", cap=2.5)
    assert weights.flatten().tolist() == pytest.approx([2.0, 0.5, 2.5, 1.2, 0.5, 1.0], rel=1e-6)
    assert cut.tolist() == [[False, False, True], [False, False, False]]
    # Per sequence: row 0's product 2 * 0.5 * 3 = 3 is capped at 2.5; row 1's 1.2 * 0.5 = 0.6.
    weights, cut = grpo.truncated_is_weights(trainer, engine, mask, "sequence", cap=2.5)
    assert weights.flatten().tolist() == pytest.approx([2.5] * 3 + [0.6] * 3, rel=1e-6)
    assert cut.tolist() == [[True] * 3, [False] * 3]
    # Detached: the correction is a constant of the gradient, as TRL's and verl's.
    grad_logp = trainer.clone().requires_grad_(True)
    assert not grpo.truncated_is_weights(grad_logp, engine, mask)[0].requires_grad
    with pytest.raises(ValueError):
        grpo.truncated_is_weights(trainer, engine, mask, "none")


def test_the_is_weights_multiply_the_surrogate_and_not_the_kl():
    trainer, engine, mask = _is_case()
    ref = trainer - math.log(2)  # pi_ref = pi / 2 on every token: k3 = 0.5 + log 2 - 1
    kl0 = 0.5 + math.log(2) - 1
    adv = torch.tensor([1.0, -0.5])
    kw = dict(beta=0.1, eps_low=0.2, eps_high=0.2, loss_type="grpo", total_sequences=2,
              total_tokens=5, max_tokens=3)
    token, _ = grpo.truncated_is_weights(trainer, engine, mask, "token", cap=2.5)
    loss, _ = grpo.grpo_loss(trainer, trainer, ref, adv, mask, is_weights=token, **kw)
    # Ratio 1, so each token's surrogate is its advantage, times its weight:
    # row 0: -1 * (2, 0.5, 2.5), mean -5/3; row 1: +0.5 * (1.2, 0.5), mean 0.425.
    # The KL adds 0.1 * kl0 to each row's mean, unweighted; grpo averages the two rows.
    assert float(loss) == pytest.approx((-5 / 3 + 0.425 + 2 * 0.1 * kl0) / 2, rel=1e-6)
    seq, _ = grpo.truncated_is_weights(trainer, engine, mask, "sequence", cap=2.5)
    loss, _ = grpo.grpo_loss(trainer, trainer, ref, adv, mask, is_weights=seq, **kw)
    # row 0: -1 * 2.5; row 1: +0.5 * 0.6 = 0.3.
    assert float(loss) == pytest.approx((-2.5 + 0.3 + 2 * 0.1 * kl0) / 2, rel=1e-6)


def test_no_is_correction_leaves_the_loss_exactly_as_it_was():
    torch.manual_seed(3)
    logp, old, ref = torch.randn(3, 4) - 2, torch.randn(3, 4) - 2, torch.randn(3, 4) - 2
    adv, mask = torch.tensor([0.7, -1.2, 0.0]), (torch.rand(3, 4) > 0.2).long()
    kw = dict(beta=0.04, eps_low=0.2, eps_high=0.28, loss_type="dapo", total_sequences=3,
              total_tokens=int(mask.sum()), max_tokens=4)
    # The loss as written before the correction existed: -surrogate + beta * k3, aggregated.
    surrogate, _ = grpo.clipped_surrogate(logp, old, adv, 0.2, 0.28, mask)
    today = grpo.aggregate(-surrogate + 0.04 * grpo.kl_k3(logp, ref), mask, "dapo",
                           total_sequences=3, total_tokens=kw["total_tokens"], max_tokens=4)
    assert torch.equal(grpo.grpo_loss(logp, old, ref, adv, mask, **kw)[0], today)
    assert torch.equal(grpo.grpo_loss(logp, old, ref, adv, mask, is_weights=None, **kw)[0], today)


def test_k3_and_the_log_ratio_are_bounded_before_exp_by_hand():
    # d = ref - logp = 30: clamped to 20, exp(20) - 21 is over the bound: k3 is 10. d = -30:
    # clamped to -20, exp(-20) + 20 - 1 is 19.000000002: 10 too. d = 1: untouched, e - 2.
    logp = torch.tensor([[0.0, 0.0, 0.0]])
    ref = torch.tensor([[30.0, -30.0, 1.0]])
    assert grpo.kl_k3(logp, ref)[0].tolist() == pytest.approx([10.0, 10.0, math.e - 2])
    # A log-ratio of 1000 is exp(20), of -1000 exp(-20), per token and in GSPO's mean.
    old = torch.zeros(1, 2)
    big = torch.tensor([[1000.0, -1000.0]])
    mask = torch.ones(1, 2)
    assert grpo.importance_ratio(big, old, mask, "token")[0].tolist() == pytest.approx(
        [math.exp(20), math.exp(-20)])
    assert grpo.importance_ratio(big, old, mask, "sequence")[0].tolist() == pytest.approx(
        [1.0, 1.0])


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_an_overflowing_token_leaves_the_loss_and_gradient_finite(level):
    # Row 0 has a zero advantage and one token whose log-ratio and k3 overflow exp unbounded
    # (a padded position's garbage log-prob, off the mask); row 1 is ordinary. Unbounded, inf
    # times 0 was NaN and cancelled the whole step.
    logp = torch.tensor([[-0.5, 0.0], [-0.4, -0.6]], requires_grad=True)
    old = torch.tensor([[-0.5, -1000.0], [-0.5, -0.5]])  # log-ratio 1000
    ref = torch.tensor([[-0.5, 900.0], [-0.5, -0.5]])  # k3's d = 900
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    adv = torch.tensor([0.0, 1.0])
    loss, _ = grpo.grpo_loss(logp, old, ref, adv, mask, beta=0.04, eps_low=0.2, eps_high=0.2,
                             loss_type="dapo", total_sequences=2, total_tokens=3, max_tokens=2,
                             importance_level=level)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    # The loss is the ordinary row's alone: the zero-advantage row adds nothing, and the bound
    # never touches ordinary tokens.
    ordinary, _ = grpo.grpo_loss(logp.detach()[1:], old[1:], ref[1:], adv[1:], mask[1:],
                                 beta=0.04, eps_low=0.2, eps_high=0.2, loss_type="dapo",
                                 total_sequences=1, total_tokens=3, max_tokens=2,
                                 importance_level=level)
    assert float(loss.detach()) == pytest.approx(float(ordinary), rel=1e-6)


def test_masked_is_modes_zero_what_lies_outside_the_bounds_by_hand():
    trainer, engine, mask = _is_case()
    # Token ratios: row 0 (2, 0.5, 3), row 1 (1.2, 0.5, 1 off the mask); bounds [0.6, 2.5].
    weights, out = grpo.truncated_is_weights(trainer, engine, mask, "token_mask", cap=2.5,
                                             cap_min=0.6)
    assert weights.flatten().tolist() == pytest.approx([2.0, 0.0, 0.0, 1.2, 0.0, 1.0], rel=1e-6)
    assert out.tolist() == [[False, True, True], [False, True, False]]
    # Sequence ratios 3 (over the cap: the whole row is 0) and 0.6 (inside [0.55, 2.5]: kept).
    weights, out = grpo.truncated_is_weights(trainer, engine, mask, "sequence_mask", cap=2.5,
                                             cap_min=0.55)
    assert weights.flatten().tolist() == pytest.approx([0.0] * 3 + [0.6] * 3, rel=1e-6)
    assert out.tolist() == [[True] * 3, [False] * 3]
    # The truncated modes clamp from below too: 0.5 becomes 0.6.
    weights, _ = grpo.truncated_is_weights(trainer, engine, mask, "token", cap=2.5, cap_min=0.6)
    assert weights.flatten().tolist() == pytest.approx([2.0, 0.6, 2.5, 1.2, 0.6, 1.0], rel=1e-6)


def test_clip_sides_and_approx_kl_by_hand():
    # Ratios e^0.5 (over 1.28) and e^-0.5 (under 0.8) on each sign of the advantage.
    old = torch.zeros(2, 2)
    logp = torch.tensor([[0.5, -0.5], [0.5, -0.5]])
    adv, mask = torch.tensor([1.0, -1.0]), torch.ones(2, 2)
    kw = dict(beta=0.0, eps_low=0.2, eps_high=0.28, loss_type="grpo", total_sequences=2,
              total_tokens=4, max_tokens=2)
    _, aux = grpo.grpo_loss(logp, old, None, adv, mask, **kw)
    # A > 0 clips only the high side (ratio 1.65), A < 0 only the low side (ratio 0.61).
    assert aux["clipped_high"].tolist() == [[True, False], [False, False]]
    assert aux["clipped_low"].tolist() == [[False, False], [False, True]]
    assert torch.equal(aux["clipped"], aux["clipped_low"] | aux["clipped_high"])
    # CleanRL's approx_kl: (r - 1) - log r = e^0.5 - 1.5 and e^-0.5 - 0.5.
    want = [math.exp(0.5) - 1.5, math.exp(-0.5) - 0.5]
    assert aux["approx_kl"][0].tolist() == pytest.approx(want)
    assert float(grpo.approx_kl(old, old).abs().max()) == 0.0  # the first iteration: 0


def test_bias_corrected_k3_weights_the_kl_by_the_ratio_by_hand():
    # One token, ratio pi/pi_old = e^0.5, pi_ref = pi / 2: k3 = 0.5 + log 2 - 1; A = 0.
    logp, old = torch.tensor([[0.5]]), torch.zeros(1, 1)
    ref, kl0 = logp - math.log(2), 0.5 + math.log(2) - 1
    kw = dict(beta=0.1, eps_low=0.2, eps_high=0.2, loss_type="grpo", total_sequences=1,
              total_tokens=1, max_tokens=1)
    plain, _ = grpo.grpo_loss(logp, old, ref, torch.zeros(1), torch.ones(1, 1), **kw)
    corrected, _ = grpo.grpo_loss(logp, old, ref, torch.zeros(1), torch.ones(1, 1),
                                  kl_ratio=True, **kw)
    assert float(plain) == pytest.approx(0.1 * kl0)
    assert float(corrected) == pytest.approx(0.1 * kl0 * math.exp(0.5))
