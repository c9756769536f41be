"""Running each group's prompt once gives the same logits and gradients as running every row."""

import torch

from learner.model import chat_prompt
from learner.rollout import generate
from learner.training.forward import completion_logits
from tests import learner_helpers as h


def _rows():
    tok, model = h.tokenizer(), h.model()
    prompts = [chat_prompt(tok, "What is 2 + 3?"), chat_prompt(tok, "Add 4 and 5, please.")]
    torch.manual_seed(0)
    roll = generate(model, tok, prompts, group_size=3, max_new_tokens=7)
    groups = torch.arange(2).repeat_interleave(3)
    keep = torch.tensor([0, 1, 2, 4, 5])  # ragged groups, as after dropping a sample
    args = (roll.prompt_ids[keep], roll.prompt_mask[keep], roll.completion_ids[keep],
            roll.completion_mask[keep], groups[keep])
    return model, args


def test_shared_prompt_logits_and_gradients_match_the_plain_forward():
    model, args = _rows()
    mask = args[3].bool()
    results = []
    for share in (False, True):
        model.zero_grad()
        logits = completion_logits(model, *args, share_prompts=share)
        loss = torch.log_softmax(logits, -1).gather(-1, args[2].unsqueeze(-1)).squeeze(-1)[mask]
        loss.sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((logits.detach()[mask], grads))
    (plain_logits, plain_grads), (shared_logits, shared_grads) = results
    assert torch.allclose(plain_logits, shared_logits, atol=1e-4)
    assert torch.allclose(plain_grads, shared_grads, atol=1e-4, rtol=1e-3)
