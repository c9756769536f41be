"""Prefill without repeated work: the prompt prefix every context shares is prefilled once
(``decoding.common_prefix``, ``MIN_SHARED_PREFIX``), and runs of rows of like lengths apart
(``decoding.like_lengths``). Decoding so gives the tokens, lengths, ends and log-probs of each
row prefilling its whole prompt in one padded forward, on a model loaded with
``from_pretrained``, refilled or not, greedy or sampled, and on a device that is not the
CPU."""

import os
import textwrap

import torch

import learner.sampling.decoding as decoding
from learner.model import chat_prompt
from learner.sampling.decoding import common_prefix, left_pad, like_lengths
from learner.sampling.engine import HFEngine
from learner.sampling.rollout import generate
from tests import learner_helpers as h


def test_the_common_prefix_is_the_tokens_every_row_starts_with_less_the_last_one():
    ids, mask = left_pad([[5, 6, 7, 8, 9], [5, 6, 7, 1], [5, 6, 7, 8, 2, 3]], 0)
    assert common_prefix(ids, mask) == 3
    ids, mask = left_pad([[5, 6, 7], [5, 6, 7, 8]], 0)
    assert common_prefix(ids, mask) == 2  # the shortest keeps one token of its own
    ids, mask = left_pad([[4, 6, 7], [5, 6, 7]], 0)
    assert common_prefix(ids, mask) == 0
    ids, mask = left_pad([[5, 6, 7, 8], [5, 6, 7, 9]], 0)
    mask[0, 1] = 0  # a hole: not left padding, so nothing is shared
    assert common_prefix(ids, mask) == 0


def test_rows_are_prefilled_in_runs_of_like_lengths_of_enough_rows():
    assert like_lengths([10] * 20) == [(0, 20)]
    # 8 rows of 5 then 8 of 20: one forward would pad the first 8 to 20 (60% padding).
    assert like_lengths([5] * 8 + [20] * 8) == [(0, 8), (8, 16)]
    assert like_lengths([5] * 7 + [20] * 8) == [(0, 15)]  # no run of fewer than 8 rows
    assert like_lengths([5] * 8 + [20] * 7) == [(0, 15)]  # nor a short one left at the end
    # 10 rows of 10 then 10 of 11 pad 10 of 220 positions (5%): one run; a row of 12 would
    # pad 30 of 252 (12%).
    assert like_lengths([10] * 10 + [11] * 10 + [12] * 2, min_rows=1) == [(0, 20), (20, 22)]


def test_runs_of_like_lengths_decode_what_one_padded_prefill_decodes(monkeypatch):
    tok, model = h.tokenizer(), h.model()
    prompts = [chat_prompt(tok, "What is 1 + 1?" + " Think." * (k // 2)) for k in range(18)]
    with h.forward_shapes(model, prefill_only=True) as prefills:
        runs = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=6,
                        greedy=True)
        in_runs = [rows for rows, _ in prefills]
        monkeypatch.setattr(decoding, "like_lengths", lambda lengths: [(0, len(lengths))])
        prefills.clear()
        one = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=6,
                       greedy=True)
    # the shared prefix, then every prompt's rest in one forward
    assert [rows for rows, _ in prefills] == [1, 18]
    assert in_runs[0] == 1 and len(in_runs) > 2 and sum(in_runs[1:]) == 18
    assert runs.texts == one.texts
    assert torch.equal(runs.completion_ids, one.completion_ids)
    assert torch.allclose(runs.logprobs, one.logprobs, atol=1e-5)


def _prompts(tok):
    return [chat_prompt(tok, f"What is {i} + {j}?" + " Think." * (i * j % 3))
            for i in range(2) for j in range(3)]


def test_a_shared_prefix_decodes_what_prefilling_each_whole_prompt_decodes(monkeypatch):
    tok, model = h.tokenizer(), h.model()  # from_pretrained
    prompts = _prompts(tok)
    eos = torch.tensor([tok.eos_token_id])
    least = decoding.MIN_SHARED_PREFIX
    prefilled: list[int] = []  # tokens each prefill forward computes (rows x width)

    def count(mod, args, kwargs):
        if kwargs["input_ids"].shape[1] > 1:
            prefilled.append(kwargs["input_ids"].numel())

    def eos_bias(mod, inp, out):  # EOS just below the top logit: rows end at mixed lengths
        return out.index_add(-1, eos, torch.full((*out.shape[:-1], 1), 1.1))

    def run() -> dict:
        engine = HFEngine(model)
        runs = {}
        for name, kw in (("greedy", dict(group_size=1, greedy=True)),
                         ("refilled", dict(group_size=1, greedy=True, max_rows=3,
                                           compact_fraction=0.0)),
                         ("sampled", dict(group_size=2, temperature=0.7, top_p=0.9))):
            torch.manual_seed(0)
            prefilled.clear()
            roll = generate(engine, tok, prompts, max_new_tokens=10, **kw)
            runs[name] = (roll, sum(prefilled))
        return runs

    hooks = [model.register_forward_pre_hook(count, with_kwargs=True),
             model.lm_head.register_forward_hook(eos_bias)]
    try:
        shared = run()
        monkeypatch.setattr(decoding, "MIN_SHARED_PREFIX", 10**6)  # nothing is shared
        whole = run()
    finally:
        for hook in hooks:
            hook.remove()
    prefix = len(os.path.commonprefix([tok(p, add_special_tokens=False)["input_ids"]
                                       for p in prompts]))
    assert prefix >= least
    assert len(set(whole["greedy"][0].lengths.tolist())) > 1  # rows end at mixed lengths
    for name, (roll, tokens) in shared.items():
        ref, ref_tokens = whole[name]
        # The prefix is computed once, not once per prompt.
        assert tokens <= ref_tokens - (len(prompts) - 1) * prefix, name
        assert roll.texts == ref.texts, name
        assert torch.equal(roll.completion_ids, ref.completion_ids), name
        assert torch.equal(roll.lengths, ref.lengths), name
        assert torch.equal(roll.truncated, ref.truncated), name
        assert torch.allclose(roll.logprobs, ref.logprobs, atol=1e-5), name


LAZY = textwrap.dedent("""
    import torch, torch._lazy, torch._lazy.ts_backend
    torch._lazy.ts_backend.init()
    from learner.sampling.engine import HFEngine
    from learner.sampling.rollout import generate
    from tests import learner_helpers as h
    from tests.test_decoding_prefill import _prompts
    tok = h.tokenizer()
    prompts = _prompts(tok)[:4]
    cpu = generate(HFEngine(h.model()), tok, prompts, group_size=1, max_new_tokens=4,
                   greedy=True, max_rows=3)
    model = h.model().to(torch.device("lazy"))
    lazy = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=4,
                    greedy=True, max_rows=3)
    assert lazy.completion_ids.device.type == "lazy"
    assert lazy.texts == cpu.texts, (lazy.texts, cpu.texts)
    assert torch.allclose(lazy.logprobs.cpu(), cpu.logprobs, atol=1e-4)
    print("ok")
""")


def test_a_shared_prefix_decodes_on_a_device_that_is_not_the_cpu():
    """On torch's lazy device, which refuses a CPU tensor as CUDA does (a subprocess: the
    backend stays out of the other tests' process)."""
    h.run_script_printing_ok(LAZY)
