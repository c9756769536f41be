"""Batched generation with the tiny model: masks, greedy agreement with transformers, compaction,
and the sampling log-probs the loss passes reproduce."""

import contextlib
import os

import torch
from transformers import DynamicCache

from learner.model import cache_kwarg, chat_prompt
from learner.sampling.decoding import MIN_SHARED_PREFIX, sample_next
from learner.sampling.engine import HFEngine
from learner.sampling.kernels.kv_cache import HEADROOM, ReservedLayer, decode_cache
from learner.sampling.rollout import generate
from learner.training.forward import completion_logprobs
from tests import learner_helpers as h

PROMPTS = ["What is 2 + 3?", "What is 7 + 1? Think step by step."]


def _templated():
    return [chat_prompt(h.tokenizer(), p) for p in PROMPTS]


def test_greedy_matches_transformers_generate():
    tok, model = h.tokenizer(), h.model()
    ours = generate(HFEngine(model), tok, _templated(), group_size=1, max_new_tokens=12, greedy=True)
    enc = tok(_templated(), return_tensors="pt", padding=True, add_special_tokens=False)
    ref = model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    ref_texts = tok.batch_decode(ref[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert ours.texts == ref_texts


def test_groups_are_prompt_major_and_shapes_agree():
    torch.manual_seed(0)
    roll = generate(HFEngine(h.model()), h.tokenizer(), _templated(), group_size=3, max_new_tokens=6)
    assert roll.prompt_ids.shape[0] == roll.completion_ids.shape[0] == 6
    assert len(roll.texts) == 6
    assert torch.equal(roll.prompt_ids[0], roll.prompt_ids[2])
    assert not torch.equal(roll.prompt_ids[0], roll.prompt_ids[3])
    assert roll.completion_ids.shape[1] <= 6
    assert roll.truncated.tolist() == (roll.lengths == 6).tolist()


def test_dropping_finished_rows_changes_nothing():
    """Compacting the KV cache when rows finish must not change any completion."""
    tok, model = h.tokenizer(), h.model()
    eos = torch.tensor([tok.eos_token_id])
    # Raise the EOS logit to just below the top logit so rows finish at different steps.
    hook = model.lm_head.register_forward_hook(
        lambda mod, inp, out: out.index_add(-1, eos, torch.full((*out.shape[:-1], 1), 1.1)))
    prompts = [chat_prompt(tok, f"What is {i} + {j}?") for i in range(3) for j in range(3)]
    try:
        kept = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=16, greedy=True,
                        compact_fraction=2.0)
        dropped = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=16, greedy=True,
                           compact_fraction=0.0)
    finally:
        hook.remove()
    assert len(set(kept.lengths.tolist())) > 1  # the test exercises mixed finishing times
    assert dropped.texts == kept.texts
    assert torch.equal(dropped.completion_ids, kept.completion_ids)
    assert dropped.generated_tokens < kept.generated_tokens


def test_refilled_rows_decode_what_each_prompt_decodes_alone_never_over_max_rows():
    """``max_rows``: finished rows give their place to the next prompts (prefilled as they
    enter, the cache's padding re-aligned); greedy tokens, lengths, ends and log-probs are
    those of one call holding every prompt, and of each prompt decoded alone."""
    tok, model = h.tokenizer(), h.model()
    eos = torch.tensor([tok.eos_token_id])
    prompts = [chat_prompt(tok, f"What is {i} + {j}?" + " Think." * (i * j % 4))
               for i in range(3) for j in range(3)]
    rows: list[int] = []

    def bias(mod, inp, out):  # EOS just below the top logit: rows end at mixed lengths
        rows.append(out.shape[0])
        return out.index_add(-1, eos, torch.full((*out.shape[:-1], 1), 1.1))

    engine = HFEngine(model)
    hook = model.lm_head.register_forward_hook(bias)
    try:
        whole = generate(engine, tok, prompts, group_size=1, max_new_tokens=16, greedy=True)
        rows.clear()
        # (rows at once, share of them finished before they are dropped): at 0.5 and 2.0
        # finished rows stay in the batch while later prompts' rows run past their budget.
        refilled = {(m, f): generate(engine, tok, prompts, group_size=1, max_new_tokens=16,
                                     greedy=True, max_rows=m, compact_fraction=f)
                    for m, f in ((2, 0.25), (4, 0.25), (4, 0.5), (3, 2.0))}
        most = max(rows)
        alone = [generate(engine, tok, [p], group_size=1, max_new_tokens=16, greedy=True)
                 for p in prompts]
    finally:
        hook.remove()
    assert len(set(whole.lengths.tolist())) > 2  # rows leave at different steps
    assert most == 4  # never more rows in a forward than max_rows
    for m, roll in refilled.items():
        assert roll.texts == whole.texts, m
        assert torch.equal(roll.completion_ids, whole.completion_ids), m
        assert torch.equal(roll.truncated, whole.truncated), m
        assert torch.allclose(roll.logprobs, whole.logprobs, atol=1e-5), m
        if m[1] < 1:  # finished rows leave the batch
            assert roll.generated_tokens < whole.generated_tokens, m
    assert [r.texts[0] for r in alone] == whole.texts


def test_refilled_contexts_enter_shortest_first_and_come_back_in_order():
    """Refilled, each prefill pads its prompts to the longest of them: contexts enter
    shortest first, so a prefill holds prompts of like lengths; rows keep the given order."""
    tok, model = h.tokenizer(), h.model()
    prompts = [chat_prompt(tok, "What is 1 + 1?" + " Think." * n) for n in (6, 0, 4, 1, 5, 2)]
    lengths = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    with h.forward_shapes(model, prefill_only=True) as prefills:
        refilled = generate(HFEngine(model), tok, prompts, group_size=1, max_new_tokens=3,
                            greedy=True, max_rows=2, compact_fraction=0.0)
    widths = [positions for _, positions in prefills]
    alone = [generate(HFEngine(model), tok, [p], group_size=1, max_new_tokens=3, greedy=True)
             for p in prompts]
    ranked = sorted(lengths)
    # The chat template's common start is prefilled once, then the rest of each prompt.
    shared = len(os.path.commonprefix([tok(p, add_special_tokens=False)["input_ids"]
                                       for p in prompts]))
    assert shared >= MIN_SHARED_PREFIX
    assert widths == [shared] + [max(ranked[i:i + 2]) - shared for i in range(0, 6, 2)]
    assert refilled.texts == [r.texts[0] for r in alone]  # in the given order


def test_a_completion_ends_at_its_first_eos_and_only_a_full_one_is_truncated():
    tok, model = h.tokenizer(), h.model()
    eos = tok.eos_token_id
    # EOS wins the argmax from the third decoding step on for the first prompt's rows only.
    calls = []

    def boost(mod, inp, out):
        if out.shape[0] == 1:  # the shared prompt prefix's own forward
            return out
        calls.append(1)
        if len(calls) >= 3:
            out[0, -1, eos] = 1e4
        return out

    hook = model.lm_head.register_forward_hook(boost)
    try:
        roll = generate(HFEngine(model), tok, _templated(), group_size=1, max_new_tokens=6, greedy=True,
                        compact_fraction=2.0)  # no compaction: row 0 stays at index 0
    finally:
        hook.remove()
    assert roll.lengths.tolist() == [3, 6]
    assert roll.completion_ids[0, 2] == eos and roll.completion_ids[0, 3:].eq(tok.pad_token_id).all()
    assert roll.truncated.tolist() == [False, True]
    assert (roll.logprobs[0, 3:] == 0).all() and (roll.logprobs[1] < 0).all()


def test_sampling_draws_each_token_with_its_probability():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, -1.0, float("-inf"), 2.0]]).repeat(100_000, 1)
    for temperature in (1.0, 0.5):
        draws = sample_next(logits, temperature, 1.0, greedy=False)
        freq = torch.bincount(draws, minlength=5).double() / draws.numel()
        want = torch.softmax(logits[0] / temperature, -1).double()
        assert torch.allclose(freq, want, atol=0.005), (freq, want)
        assert freq[3] == 0  # probability 0: never drawn
    # top_p keeps the smallest prefix reaching the mass: here the top token alone (p = 0.64)
    assert set(sample_next(logits[:1000], 1.0, 0.5, greedy=False).tolist()) == {4}
    assert set(sample_next(logits[:1000], 1.0, 0.8, greedy=False).tolist()) == {4, 1}
    # ... and draws each nucleus token with its renormalised probability.
    draws = sample_next(logits, 1.0, 0.8, greedy=False)
    p = torch.softmax(logits[0], -1)
    assert abs(float((draws == 1).double().mean()) - float(p[1] / (p[1] + p[4]))) < 0.005


def test_sampling_logprobs_are_those_the_loss_passes_compute_at_the_same_temperature_and_top_p(
        tmp_path):
    """The ratio's old and new log-probs are of the distribution sampled from: the loss pass
    at the run's temperature and top-p reproduces what generation recorded, with a model
    loaded by from_pretrained."""
    from learner.model import load_model

    tok, model = h.tokenizer(), load_model(str(h.save_tiny(tmp_path / "tiny")))
    prompts = [chat_prompt(tok, f"What is {i} + 4?") for i in range(3)]
    for temperature, top_p in ((0.7, 1.0), (1.3, 0.8)):
        torch.manual_seed(0)
        roll = generate(HFEngine(model), tok, prompts, group_size=4, max_new_tokens=10,
                        temperature=temperature, top_p=top_p)
        groups = torch.arange(3).repeat_interleave(4)
        with torch.no_grad():
            logp, _ = completion_logprobs(model, roll.prompt_ids, roll.prompt_mask,
                                          roll.completion_ids, roll.completion_mask, groups,
                                          temperature=temperature, top_p=top_p)
            plain, _ = completion_logprobs(model, roll.prompt_ids, roll.prompt_mask,
                                           roll.completion_ids, roll.completion_mask, groups)
        valid = roll.completion_mask.bool()
        assert torch.allclose(logp[valid], roll.logprobs[valid], atol=2e-4), (temperature, top_p)
        assert not torch.allclose(plain[valid], roll.logprobs[valid], atol=1e-2)


def test_the_decoding_cache_matches_dynamic_cache_through_growth_repeats_and_drops():
    """The in-place cache (kv_cache.decode_cache) must give DynamicCache's logits at every step,
    past its first buffer's room, after a group repeat and after rows leave."""
    model = h.model()
    ids = torch.randint(5, 500, (2, 7), generator=torch.Generator().manual_seed(0))
    plain, reserved = DynamicCache(), decode_cache()
    with torch.no_grad():
        outs = [model(input_ids=ids, use_cache=True, **{cache_kwarg(model): c}).logits[:, -1]
                for c in (plain, reserved)]
        if ReservedLayer is not None:
            assert all(type(layer) is ReservedLayer for layer in reserved.layers)
        for c in (plain, reserved):
            c.batch_repeat_interleave(3)
        nxt = outs[0].repeat_interleave(3, 0).argmax(-1, keepdim=True)
        for step in range(HEADROOM + 20):  # the buffers grow at least once
            if step == 10:
                keep = torch.tensor([0, 2, 3, 5])
                for c in (plain, reserved):
                    c.batch_select_indices(keep)
                nxt = nxt[keep]
            outs = [model(input_ids=nxt, use_cache=True, **{cache_kwarg(model): c}).logits[:, -1]
                    for c in (plain, reserved)]
            assert torch.allclose(outs[0], outs[1], atol=1e-6, rtol=1e-6), step
            nxt = outs[0].argmax(-1, keepdim=True)
    assert reserved.get_seq_length() == plain.get_seq_length() == 7 + HEADROOM + 20
    keys = [layer.keys for layer in reserved.layers]
    assert keys[0].shape == plain.layers[0].keys.shape
    assert torch.equal(keys[0], plain.layers[0].keys)


def test_a_loaded_model_on_onednn_decodes_long_completions_as_transformers_does(tmp_path):
    """generate() with a from_pretrained model routed to oneDNN (packed weights, in-place
    cache) past the cache's first room gives transformers' own greedy completions."""
    from learner.model import load_model
    from learner.sampling.kernels.onednn_linear import available, route_linears

    tok = h.tokenizer()
    model = load_model(str(h.save_tiny(tmp_path / "tiny")))
    if available():
        assert route_linears(model) > 0
    eos = torch.tensor([tok.eos_token_id])
    # Keep EOS out of reach so that every row runs the whole budget.
    hook = model.lm_head.register_forward_hook(
        lambda mod, inp, out: out.index_fill(-1, eos, -1e4))
    try:
        n = HEADROOM + 16
        ours = generate(HFEngine(model), tok, _templated(), group_size=1, max_new_tokens=n, greedy=True)
        enc = tok(_templated(), return_tensors="pt", padding=True, add_special_tokens=False)
        ref = model.generate(**enc, max_new_tokens=n, do_sample=False,
                             pad_token_id=tok.pad_token_id)
    finally:
        hook.remove()
    assert ours.lengths.tolist() == [n, n]
    assert torch.equal(ours.completion_ids, ref[:, enc["input_ids"].shape[1]:])


def test_a_row_stops_where_the_answer_end_rule_says_keeping_the_token_that_completes_it():
    tok, model = h.tokenizer(), h.model()
    free = generate(HFEngine(model), tok, _templated(), group_size=1, max_new_tokens=24, greedy=True)
    assert min(len(t) for t in free.texts) > 12  # the rule below ends every row early
    seen = []

    def end(text: str) -> int | None:
        # Answers "complete" only once 12 characters are written, ending at the 6th: the cut
        # goes back to the token that wrote it.
        seen.append(text)
        return 6 if len(text) >= 12 else None

    cut = generate(HFEngine(model), tok, _templated(), group_size=1, max_new_tokens=24, greedy=True,
                   answer_end=end)
    assert seen  # asked as the rows grew
    for row, (whole, text) in enumerate(zip(free.texts, cut.texts, strict=True)):
        n = int(cut.lengths[row])
        assert whole.startswith(text) and len(text) >= 6
        assert len(tok.decode(cut.completion_ids[row, :n - 1], skip_special_tokens=True)) < 6
        assert not cut.truncated[row]  # a stop is an ending, not a truncation
        assert cut.logprobs[row, :n].ne(0).all() and cut.logprobs[row, n:].eq(0).all()
    assert cut.lengths.lt(free.lengths).all()


class _CountingDecodes:
    """Counts the tokens a stop rule decodes: ``tokenizer.decode`` calls (and their tokens)
    and the steps of tokenizers' streaming decoder."""

    def __init__(self, monkeypatch, tok):
        import learner.sampling.decoding as decoding

        self.calls = self.tokens = 0
        real_decode, real_stream = tok.decode, decoding.DecodeStream

        def decode(*args, **kwargs):
            ids = args[0] if args else kwargs["token_ids"]
            self.calls, self.tokens = self.calls + 1, self.tokens + len(ids)
            return real_decode(*args, **kwargs)

        counter = self

        class Stream:
            def __init__(self, **kwargs):
                self.stream = real_stream(**kwargs)

            def step(self, tokenizer, token):
                counter.calls, counter.tokens = counter.calls + 1, counter.tokens + 1
                return self.stream.step(tokenizer, token)

        monkeypatch.setattr(tok, "decode", decode)
        monkeypatch.setattr(decoding, "DecodeStream", Stream)


def test_the_stop_rule_decodes_each_token_once(monkeypatch):
    """4 rows of 128 tokens under a rule that never fires: the rule reads each new token once,
    never every prefix again (which is O(L^2) in the completion's length)."""
    tok, model = h.tokenizer(), h.model()
    count = _CountingDecodes(monkeypatch, tok)
    asked = []
    roll = generate(HFEngine(model), tok, _templated(), group_size=2, max_new_tokens=128,
                    answer_end=lambda text: asked.append(text))
    rows_tokens = int(roll.lengths.sum())
    assert roll.lengths.eq(128).all()  # no row stopped: every token was read
    assert count.tokens <= rows_tokens + roll.completion_ids.numel()  # + the texts at the end
    assert count.calls <= rows_tokens + 1
    assert asked and len(asked) <= rows_tokens  # asked only when a row's text grew


def test_an_env_without_an_answer_rule_is_not_decoded_while_sampling(monkeypatch):
    from envs.base import answer_rule
    from envs.domains.code_tests import CodeTestsEnv
    from learner.sampling.graded import sample_graded

    assert answer_rule(h.ShortEnv()) is None  # TaskEnv's default: no rule
    code = CodeTestsEnv.__new__(CodeTestsEnv)  # answer_end reads no state
    assert answer_rule(code) == code.answer_end
    tok, model, env = h.tokenizer(), h.model(), h.ShortEnv()
    tasks = [env.pack.task_at("train", i) for i in range(2)]
    count = _CountingDecodes(monkeypatch, tok)
    graded = sample_graded(lambda: contextlib.nullcontext(HFEngine(model)), tok, env, tasks,
                           [env.prompt(t) for t in tasks], group_size=2, max_new_tokens=32,
                           bridge=None, workers=1)
    assert len(graded.rollout.texts) == 4
    assert count.calls == 1  # the finished texts' one batch_decode


def test_incremental_text_is_the_decoded_text_with_either_decoder():
    """Tokens of text with multi-byte characters split over byte tokens, fenced code and a
    special token, fed one by one: the kept text is ``decode``'s, through tokenizers' stream
    and through the window used for a tokenizer without one, and the cut is the old one's."""
    from learner.sampling.decoding import RowText, text_stop

    tok = h.tokenizer()
    text = "Sure 😀 ```python\ndef f(x):\n    return x  # é中文\n``` then prose <|im_end|> end"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    complete = 0
    for streaming in (True, False):
        row = RowText(tok)
        if not streaming:
            row._stream = None
        for k, token in enumerate(ids, 1):
            row.add(token)
            whole = tok.decode(ids[:k], skip_special_tokens=True)
            assert whole.startswith(row.text)  # a character not yet complete shows later
            if not whole.endswith("\ufffd"):
                assert row.text == whole
                complete = k
        assert complete == len(ids)
    fence = "```"

    def end(t):
        at = t.find(fence, t.find(fence) + 1)
        return None if at < 0 or t.find(fence) < 0 else at + 3

    stop = text_stop(tok, end)
    keep = next(k for k in range(1, len(ids) + 1) if stop(0, ids[:k]) is not None)
    cut = stop(0, ids[:keep])
    assert tok.decode(ids[:cut], skip_special_tokens=True).endswith("```")
    assert not tok.decode(ids[:cut - 1], skip_special_tokens=True).endswith("```")
    assert stop(0, ids[:1]) is None  # a new row (a new call) starts over
