"""The loss passes' log-probs (prompts run once per group, rows in length buckets, the
log-softmax on valid positions only) equal those of one plain forward, and so do the gradients."""

import pytest
import torch

from learner import distribution
from learner.model import chat_prompt, load_model
from learner.sampling.engine import HFEngine
from learner.sampling.rollout import generate
from learner.training.forward import (
    completion_lengths,
    completion_logits,
    completion_logprobs,
    length_buckets,
)
from tests import learner_helpers as h


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """A model loaded as users load one, and ragged rows: completions of lengths 1 to 9 in a
    width of 9, and a group that lost a sample (as after dropping a sandbox error)."""
    path = h.save_tiny(tmp_path_factory.mktemp("tiny"))
    tok, model = h.tokenizer(), load_model(str(path))
    model.train()
    prompts = [chat_prompt(tok, "What is 2 + 3?"), chat_prompt(tok, "Add 4 and 5, please.")]
    torch.manual_seed(0)
    roll = generate(HFEngine(model), tok, prompts, group_size=4, max_new_tokens=9)
    keep = torch.tensor([0, 1, 2, 3, 5, 6, 7])
    lengths = torch.tensor([3, 9, 1, 7, 5, 2, 9])
    mask = (torch.arange(roll.completion_ids.shape[1]) < lengths.unsqueeze(-1)).long()
    ids = roll.completion_ids[keep].masked_fill(mask == 0, tok.pad_token_id)
    groups = torch.arange(2).repeat_interleave(4)[keep]
    return model, (roll.prompt_ids[keep], roll.prompt_mask[keep], ids, mask), groups


def _grads(model):
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.zero_grad(set_to_none=True)
    return grads


@pytest.mark.parametrize("share_prompts", [True, False])
@pytest.mark.parametrize("overhead", [0, 16, 10**6])  # a pass per length ... one pass
def test_logprobs_entropy_and_gradients_match_one_plain_forward(rows, share_prompts, overhead):
    model, args, groups = rows
    ids, mask = args[2], args[3]
    # A loss mask with a hole (tool output inside a multi-turn completion): log-probs are
    # still returned at every attended completion position.
    loss_mask = mask.clone()
    loss_mask[1, 3:5] = 0
    weights = torch.linspace(0.5, 1.5, ids.numel()).view_as(ids) * loss_mask
    temperature = 0.7

    logits = completion_logits(model, *args)
    want = distribution.token_logprobs(logits, ids, temperature) * mask
    want_entropy = distribution.token_entropy(logits.detach(), temperature) * mask
    (want * weights).sum().backward()
    want_grads = _grads(model)

    logp, entropy = completion_logprobs(model, *args, groups, temperature=temperature,
                                        share_prompts=share_prompts, entropy=True,
                                        bucket_overhead=overhead)
    (logp * weights).sum().backward()
    assert logp.shape == ids.shape and not entropy.requires_grad
    assert torch.all(logp[mask == 0] == 0) and torch.all(entropy[mask == 0] == 0)
    assert torch.allclose(logp, want, atol=1e-5)
    assert torch.allclose(entropy, want_entropy, atol=1e-4)
    # The head's weight gradient sums over valid positions only (chunks): float rounding
    # of a sum whose largest entries are ~7 differs by up to ~3e-5.
    assert torch.allclose(_grads(model), want_grads, atol=1e-4, rtol=1e-4)


def test_length_buckets_hold_every_row_once_cut_by_length():
    lengths = torch.tensor([5, 0, 48, 12, 48, 5, 30, 1, 12])
    for overhead, want in [(0, [[7], [0, 5], [3, 8], [6], [2, 4]]),  # no padding at all
                           (10**6, [[7, 0, 5, 3, 8, 6, 2, 4]])]:  # one pass
        assert [b.tolist() for b in length_buckets(lengths, overhead)] == want
    # In between, fewer passes for a little padding; the empty row is in none.
    buckets = length_buckets(lengths, 16)
    assert sorted(torch.cat(buckets).tolist()) == [0, 2, 3, 4, 5, 6, 7, 8]
    assert 1 < len(buckets) < 5
    assert length_buckets(torch.zeros(3, dtype=torch.long), 16) == []


def test_completion_lengths_reach_the_last_attended_position():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    assert completion_lengths(mask).tolist() == [3, 1, 0, 4]



def test_the_gradient_is_the_same_on_every_run_with_several_threads(rows):
    """One seed, one run: the rows of a group share their prompt's pass, and gathering it for
    them must add their gradients back in a fixed order. (Indexing with repeated rows did it
    with parallel atomic adds on CPU: here every one of 4 runs gave a different gradient, and
    two runs of one seed drifted apart after the first step.)"""
    model, tok = rows[0], h.tokenizer()
    prompts = [chat_prompt(tok, f"What is {i} + 3?") for i in range(4)]
    torch.manual_seed(0)
    roll = generate(HFEngine(model), tok, prompts, group_size=8, max_new_tokens=12)
    n, width = roll.completion_ids.shape
    lengths = torch.randint(1, width + 1, (n,), generator=torch.Generator().manual_seed(1))
    mask = (torch.arange(width) < lengths.unsqueeze(-1)).long()
    ids = roll.completion_ids.masked_fill(mask == 0, tok.pad_token_id)
    # Groups interleaved in one pass, so that each thread holds rows of every group.
    order = torch.randperm(n, generator=torch.Generator().manual_seed(2))
    args = (roll.prompt_ids[order], roll.prompt_mask[order], ids[order], mask[order])
    groups = torch.arange(4).repeat_interleave(8)[order]
    weights = torch.linspace(0.5, 1.5, ids.numel()).view_as(ids)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = []
        for _ in range(4):
            logp, _ = completion_logprobs(model, *args, groups, bucket_overhead=10**6)
            (logp * weights).sum().backward()
            runs.append(_grads(model))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(runs[0], g) for g in runs[1:])
