"""The GRPO math against values computed by hand."""

import math

import pytest
import torch

from learner.evaluation.heldout import pass_at_k
from learner.training import grpo


def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv = grpo.group_advantages(rewards, groups, "group", eps=0.0)
    # group 0: mean 0.5, unbiased std sqrt(1/3); group 1: mean 2.75, std 1.5
    s0 = math.sqrt(1 / 3)
    expected = [0.5 / s0, -0.5 / s0, -0.5 / s0, 0.5 / s0, -0.5, -0.5, -0.5, 1.5]
    assert adv.tolist() == pytest.approx(expected, rel=1e-5)


def test_group_advantages_batch_and_none_scaling():
    rewards = torch.tensor([1.0, 0.0, 3.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    none = grpo.group_advantages(rewards, groups, "none")
    assert none.tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])
    batch = grpo.group_advantages(rewards, groups, "batch", eps=0.0)
    std = float(torch.tensor([1.0, 0.0, 3.0, 1.0]).std())  # 1.2583
    assert batch.tolist() == pytest.approx([0.5 / std, -0.5 / std, 1 / std, -1 / std], rel=1e-5)


def test_zero_variance_and_singleton_groups_get_zero_advantage():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.3])
    groups = torch.tensor([7, 7, 7, 9])  # group ids need not be contiguous
    adv = grpo.group_advantages(rewards, groups)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_token_logprobs_match_log_softmax():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 11)
    tokens = torch.randint(0, 11, (2, 3))
    want = torch.log_softmax(logits / 0.7, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(grpo.token_logprobs(logits, tokens, 0.7), want, atol=1e-6)


def test_entropy_of_uniform_is_log_vocab():
    assert grpo.token_entropy(torch.zeros(1, 2, 8))[0].tolist() == pytest.approx([math.log(8)] * 2)


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


@pytest.mark.parametrize("loss_type", grpo.LOSS_TYPES)
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
    logp = grpo.token_logprobs(logits, tokens)
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


def test_group_std_by_hand():
    rewards = torch.tensor([1.0, 0.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2])
    assert grpo.group_std(rewards, groups, 4).tolist() == pytest.approx(
        [math.sqrt(0.5), 0.0, 0.0, 0.0])
