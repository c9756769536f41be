"""Chunked scores (``forward.head_apart``): the loss passes score positions from the final hidden
states a chunk at a time, recomputing a chunk's logits in the backward. The log-probs, the
entropy and every gradient equal those of one plain forward's full logits, for chunks of one
position up to the whole pass, with tied and untied heads and with LoRA; and no tensor over
the vocabulary ever holds more rows than a chunk, in the forward or the backward."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from learner.distribution import token_entropy, token_logprobs
from learner.model import chat_prompt, load_model, with_lora
from learner.sampling.engine import HFEngine
from learner.sampling.rollout import generate
from learner.training.forward import completion_logits, completion_logprobs, head_apart
from tests import learner_helpers as h


def _untied(path):
    """A tiny model whose head is its own weight (as Qwen2.5-7B's), saved and loaded back."""
    from transformers import AutoModelForCausalLM

    config = h.model().config
    config.tie_word_embeddings = False
    torch.manual_seed(1)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(path)
    return load_model(str(path))


@pytest.fixture(scope="module")
def rows():
    """Ragged rows of two groups: completions of lengths 1 to 9."""
    tok, model = h.tokenizer(), h.model()
    prompts = [chat_prompt(tok, "What is 2 + 3?"), chat_prompt(tok, "Add 4 and 5, please.")]
    torch.manual_seed(0)
    roll = generate(HFEngine(model), tok, prompts, group_size=4, max_new_tokens=9)
    lengths = torch.tensor([3, 9, 1, 7, 5, 2, 9, 4])
    mask = (torch.arange(roll.completion_ids.shape[1]) < lengths.unsqueeze(-1)).long()
    ids = roll.completion_ids.masked_fill(mask == 0, tok.pad_token_id)
    return (roll.prompt_ids, roll.prompt_mask, ids, mask), torch.arange(2).repeat_interleave(4)


def _grads(model):
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def _model(kind, tmp_path):
    if kind == "tied":
        model = h.model()
        assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    elif kind == "untied":
        model = _untied(tmp_path / "untied")
        assert model.get_output_embeddings().weight is not model.get_input_embeddings().weight
    else:  # LoRA on every linear layer of the tied model (the head stays frozen)
        model = with_lora(h.model(), 4, 8, 0.0)
        torch.manual_seed(2)
        for name, p in model.named_parameters():
            if "lora_B" in name:  # B starts at 0: give the adapters a gradient path
                p.data.normal_(0, 0.02)
    return model.train()


@pytest.mark.parametrize("kind", ["tied", "untied", "lora"])
def test_chunked_scores_and_gradients_equal_the_full_logits(rows, kind, tmp_path):
    args, groups = rows
    model = _model(kind, tmp_path)
    ids, mask = args[2], args[3]
    weights = torch.linspace(0.5, 1.5, ids.numel()).view_as(ids) * mask
    temperature = 0.7
    logits = completion_logits(model, *args)
    want = token_logprobs(logits, ids, temperature) * mask
    want_entropy = token_entropy(logits.detach(), temperature) * mask
    (want * weights).sum().backward()
    want_grads = _grads(model)
    assert want_grads  # something trains
    valid = int(mask.sum())
    # Many chunks recomputed in the backward ... exactly one chunk ... one chunk, not recomputed
    for chunk, share in ((1, True), (5, False), (valid - 1, True), (10**6, False)):
        logp, entropy = completion_logprobs(model, *args, groups, temperature=temperature,
                                            share_prompts=share, entropy=True, logit_chunk=chunk)
        (logp * weights).sum().backward()
        got = _grads(model)
        assert torch.allclose(logp, want, atol=1e-5), (chunk, share)
        assert torch.allclose(entropy, want_entropy, atol=1e-4), (chunk, share)
        assert not entropy.requires_grad
        assert got.keys() == want_grads.keys()
        for name, g in got.items():
            # float rounding of sums over positions taken in another order
            assert torch.allclose(g, want_grads[name], atol=1e-4, rtol=1e-4), (chunk, name)


def test_chunked_scores_under_top_p_equal_the_full_logits(rows):
    """Top-p's nucleus per chunk: the same as over the full logits (a token at the nucleus's
    edge may flip with the head's rounding: its mass is under 1e-4)."""
    args, groups = rows
    model = h.model().train()
    ids, mask = args[2], args[3]
    logits = completion_logits(model, *args)
    want = token_logprobs(logits, ids, 0.7, 0.9) * mask
    want_entropy = token_entropy(logits.detach(), 0.7, 0.9) * mask
    for chunk in (7,):
        logp, entropy = completion_logprobs(model, *args, groups, temperature=0.7, top_p=0.9,
                                            entropy=True, logit_chunk=chunk)
        assert torch.allclose(logp, want, atol=1e-4)
        assert torch.allclose(entropy, want_entropy, atol=1e-3)


class _VocabRows(TorchDispatchMode):
    """The most rows of any tensor whose last dimension is the vocabulary, over every op run
    (forward and backward), the head's weight (hidden, vocab) and its gradient left out."""

    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.vocab, self.weight, self.most = vocab, (hidden, vocab), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[-1] == self.vocab \
                    and tuple(t.shape) != self.weight:
                self.most = max(self.most, t.numel() // self.vocab)
        return out


def test_no_tensor_over_the_vocabulary_holds_more_rows_than_a_chunk(rows):
    args, groups = rows
    model = h.model().train()
    vocab, hidden = model.config.vocab_size, model.config.hidden_size
    valid = int(args[3].sum())
    with _VocabRows(vocab, hidden) as seen:
        logp, _ = completion_logprobs(model, *args, groups, entropy=True, logit_chunk=4)
        logp.sum().backward()
    assert 0 < seen.most <= 4
    with _VocabRows(vocab, hidden) as whole:  # the definition: every position's logits at once
        completion_logits(model, *args).sum().backward()
    assert whole.most >= valid


def test_the_head_is_set_apart_only_within_the_block_and_not_for_softcapped_models():
    model = h.model()
    head = model.get_output_embeddings()
    with head_apart(with_lora(model, 2, 4, 0.0)) as apart:
        assert apart is head and isinstance(model.lm_head, torch.nn.Identity)
    assert model.lm_head is head
    model.config.final_logit_softcapping = 30.0  # Gemma 2's: the logits are not the head's
    with head_apart(model) as apart:
        assert apart is None and model.lm_head is head
