"""Sequence packing (``--packing``): a loss pass's rows run as one packed sequence without
padding give the padded path's log-probs, entropies, loss and gradients; flash-style
variable-length backends get the rows' boundaries and no mask; the budget and the memory plan
count packed positions; every tensor is made on the model's device."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest
import torch
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from learner import distribution
from learner.training import memory_plan
from learner.training.forward import (
    completion_logits,
    completion_logprobs,
    packed_positions,
    packing_on,
    packs_without_mask,
    padded_positions,
)
from learner.training.update import PolicyUpdate
from tests import learner_helpers as h
from tests.test_learner_micro_batches import SMOL, _batch
from tests.test_learner_trainer import assert_same_gradient, trainer, update_gradient


def _random_llama() -> LlamaForCausalLM:
    """A Llama-shaped model built in the test, with grouped-query attention (4 heads, 2 KV)."""
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128)
    return LlamaForCausalLM(config).train()


def _rows(vocab: int):
    """Ragged rows: three groups (a group's rows share their prompt) with left-padded prompts
    of 7, 3 and 1 tokens, completions of 0-9 tokens (an empty one, as after a sandbox error)
    in a width of 9."""
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    prompt_lens = torch.tensor([7, 3, 1])[groups]
    completion_lens = torch.tensor([9, 1, 0, 4, 6, 2, 9])
    p, t = 7, 9
    prompt_mask = (torch.arange(p) >= p - prompt_lens[:, None]).long()
    completion_mask = (torch.arange(t) < completion_lens[:, None]).long()
    g = torch.Generator().manual_seed(3)
    prompt_ids = torch.randint(1, vocab, (3, p), generator=g)[groups] * prompt_mask
    completion_ids = torch.randint(1, vocab, (7, t), generator=g) * completion_mask
    return (prompt_ids, prompt_mask, completion_ids, completion_mask), groups


def _grads(model):
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.zero_grad(set_to_none=True)
    return grads


def _scores(model, args, groups, **kw):
    weights = torch.linspace(0.5, 1.5, args[2].numel()).view_as(args[2])
    logp, entropy = completion_logprobs(model, *args, groups, temperature=0.7, entropy=True,
                                        **kw)
    (logp * weights).sum().backward()
    return logp.detach(), entropy, _grads(model)


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("source", ["from_pretrained", "random_llama"])
def test_packed_logprobs_entropy_and_gradients_equal_the_padded_paths(source, backend):
    model = h.model() if source == "from_pretrained" else _random_llama()
    model.set_attn_implementation(backend)
    model.train()
    args, groups = _rows(model.config.vocab_size)
    mask = args[3]
    padded = _scores(model, args, groups)  # prompts shared, rows in length buckets
    packed = _scores(model, args, groups, packing=True)
    # The definition: one plain forward per row set, padding masked.
    logits = completion_logits(model, *args)
    want = distribution.token_logprobs(logits, args[2], 0.7) * mask
    assert torch.all(packed[0][mask == 0] == 0) and torch.all(packed[1][mask == 0] == 0)
    assert not packed[1].requires_grad
    # Float rounding only: sums in another order (log-probs within 1e-5, entropies 1e-4).
    assert torch.allclose(packed[0], want.detach(), atol=1e-5)
    assert torch.allclose(packed[0], padded[0], atol=1e-5)
    assert torch.allclose(packed[1], padded[1], atol=1e-4)
    assert_same_gradient(padded[2], packed[2])


def test_packed_under_gradient_checkpointing_equals_the_padded_passes():
    """Checkpointing runs each row's prompt in the padded passes too (no shared prompts):
    the packed sequence recomputed in the backward gives the same gradient."""
    model = _random_llama()
    model.gradient_checkpointing_enable()
    args, groups = _rows(model.config.vocab_size)
    padded = _scores(model, args, groups, share_prompts=False)
    packed = _scores(model, args, groups, packing=True)
    assert torch.allclose(packed[0], padded[0], atol=1e-5)
    assert_same_gradient(padded[2], packed[2])


seen: list[dict] = []


def _cpu_varlen(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    """A CPU stand-in for flash attention's variable-length kernel: causal attention within
    each segment of ``cu_seq_lens_q``, which it must be given (as flash attention's varlen
    call is); no mask."""
    seen.append({"mask": attention_mask, **{k: kw.get(k) for k in (
        "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")}})
    bounds = kw["cu_seq_lens_q"].tolist()
    rep = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1)
    out = torch.cat([torch.nn.functional.scaled_dot_product_attention(
        query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], is_causal=True, scale=scaling)
        for a, b in zip(bounds, bounds[1:], strict=False)], dim=2)
    return out.transpose(1, 2).contiguous(), None


def test_a_varlen_backend_gets_the_rows_boundaries_and_no_mask_and_auto_packs_there():
    AttentionInterface.register("cpu_varlen", _cpu_varlen)
    AttentionMaskInterface.register("cpu_varlen", flash_attention_mask)
    model = _random_llama()
    args, groups = _rows(model.config.vocab_size)
    padded = _scores(model, args, groups)
    assert not packs_without_mask(model) and packing_on("auto", model) is False  # sdpa
    model.set_attn_implementation("cpu_varlen")
    # auto: decided per update, by the positions each layout runs (``packing_pays``)
    assert packs_without_mask(model) and packing_on("auto", model) is None
    seen.clear()
    packed = _scores(model, args, groups, packing=True)
    assert torch.allclose(packed[0], padded[0], atol=1e-5)
    assert torch.allclose(packed[1], padded[1], atol=1e-4)
    assert_same_gradient(padded[2], packed[2])
    # Each row with a completion token: its prompt and its completion but the last token.
    lengths = args[1].sum(-1) + args[3].sum(-1) - 1
    lengths = lengths[args[3].sum(-1) > 0]
    cu = [0, *torch.cumsum(lengths, 0).tolist()]
    assert len(seen) == model.config.num_hidden_layers  # one packed pass
    for call in seen:
        assert call["mask"] is None
        assert call["cu_seq_lens_q"].tolist() == cu == call["cu_seq_lens_k"].tolist()
        assert call["cu_seq_lens_q"].dtype == torch.int32
        assert call["max_length_q"] == call["max_length_k"] == int(lengths.max())


def test_packing_choices():
    model = _random_llama()
    for backend in ("sdpa", "eager"):
        model.set_attn_implementation(backend)
        assert packing_on("auto", model) is False  # a dense block-diagonal mask: never by default
        assert packing_on("on", model) is True and packing_on("off", model) is False
    with pytest.raises(ValueError, match="--packing must be auto, on or off"):
        packing_on("yes", model)


def test_packed_positions_count_each_rows_prompt_and_no_padding():
    b = _batch([5, 5, 3, 3], [2, 4, 0, 1], [0, 0, 1, 1])
    assert b.positions().tolist() == [5 + 2, 4, 3 + 0, 1]
    # Packed: every row runs its own prompt; a row with no completion token runs nothing.
    assert b.positions(packed=True).tolist() == [5 + 2, 5 + 4, 0, 3 + 1]
    assert b.parts_for(15) == 1 and b.parts_for(15, packed=True) == 2
    micro = b.split_by_tokens(b.parts_for(15, packed=True), packed=True)
    assert [int(mb.positions(packed=True).sum()) for mb in micro] == [7, 9 + 0 + 4]


def test_auto_packs_an_update_when_that_runs_fewer_positions():
    b = _batch([5, 5, 3, 3], [2, 4, 0, 1], [0, 0, 1, 1])
    args = b.prompt_mask, b.completion_mask
    # Packed: each row with a completion token, its prompt and completion less the last token.
    assert packed_positions(*args) == (5 + 2 - 1) + (5 + 4 - 1) + (3 + 1 - 1)
    # Padded, a pass per length: the two groups' prompts at the width of 5, then 0, 1 and 3
    # fed completion tokens; without shared prompts, every row's prompt at that width.
    assert padded_positions(*args, b.groups, bucket_overhead=0) == 2 * 5 + 0 + 1 + 3
    assert padded_positions(*args, b.groups, bucket_overhead=0,
                            share_prompts=False) == 3 * 5 + 0 + 1 + 3
    # One pass (a GPU's bucket overhead): every row at the longest completion.
    assert padded_positions(*args, b.groups, bucket_overhead=512) == 2 * 5 + 3 * 3

    def pays(batch, checkpointing=False):
        config = SimpleNamespace(gradient_accumulation_steps=1, micro_batch_tokens=0,
                                 gradient_checkpointing=checkpointing)
        update = SimpleNamespace(config=config, device=torch.device("cuda"))
        return PolicyUpdate.packing_pays(update, batch)  # type: ignore[arg-type]

    assert pays(b)  # 17 packed against 19 padded (prompts shared, one pass)
    ragged = _batch([1, 1], [1, 20], [0, 0])  # 21 packed against 1 + 2 x 19 padded
    assert pays(ragged)
    # The prompt's 4 runs cost more than the padding: 201 packed against 40 + 4 x 11 padded,
    # but 4 x (40 + 11) where checkpointing runs each row's prompt anyway.
    prompty = _batch([40] * 4, [10, 12, 11, 12], [0] * 4)
    assert not pays(prompty) and pays(prompty, checkpointing=True)


def test_the_micro_batch_property_holds_packed(tmp_path):
    """``grpo.aggregate`` normalises over the whole batch: packed micro-batches under a tiny
    budget, one packed pass, and the padded passes give one gradient (a model loaded with
    from_pretrained, the trainer's own update)."""
    grads, passes = [], []
    for packing, budget in (("off", 0), ("on", 0), ("on", 24)):
        t = trainer(tmp_path / f"{packing}{budget}", steps=1, eval=False,
                    micro_batch_tokens=budget, max_grad_norm=0.0, learning_rate=1e-9,
                    packing=packing)
        assert t.update.packing is (packing == "on")
        calls: list[int] = []

        def counted(*a, _real=t.update.logprobs, _calls=calls, **k):
            _calls.append(1)
            return _real(*a, **k)

        t.update.logprobs = counted
        grads.append(update_gradient(t))
        passes.append(len(calls))
    assert passes[0] == passes[1] == 1 and passes[2] > 2  # the budget did split the step
    assert_same_gradient(grads[0], grads[1])
    assert_same_gradient(grads[0], grads[2])


def test_auto_resolves_and_config_json_records_it(tmp_path):
    from learner.launch import run_record

    t = trainer(tmp_path, steps=1, eval=False)  # sdpa on CPU: auto is off
    assert t.config.packing == "off" and t.update.packing is False
    record = json.loads(json.dumps(run_record(t.config, t)))
    assert record["packing"] == "off"
    t = trainer(tmp_path / "on", steps=1, eval=False, packing="on")
    assert run_record(t.config, t)["packing"] == "on"


def test_the_memory_plan_counts_packed_positions():
    kw = dict(trainable=100, total=100, reference=True, rows=8, context=40,
              micro_batch_tokens=64, completion_share=0.5, prompt=20, group_size=4,
              checkpointing=True, step_positions=8 * 40)
    padded = memory_plan.estimate(SMOL, **kw)
    packed = memory_plan.estimate(SMOL, **kw, packing=True)
    # Packed positions hold each row's prompt already: no factor for the prompts' repeats.
    assert packed.per_position < padded.per_position
    per_layer = 4 * 576 * 4 + 10 * 576 * 4 + 5 * 1536 * 4
    assert packed.per_position == 30 * 576 * 4 + per_layer + 2 * 576 * 4
    # 320 packed positions in passes of at most 64: 5 passes of 64.
    base = memory_plan.estimate(SMOL, **kw, packing=True, mask_bytes=0)
    masked = memory_plan.estimate(SMOL, **kw, packing=True, mask_bytes=1)
    assert masked.loss_pass - base.loss_pass == 64 * 64  # SDPA's dense bool mask


LAZY = textwrap.dedent("""
    import torch, torch._lazy, torch._lazy.ts_backend
    torch._lazy.ts_backend.init()
    from learner.training.forward import completion_logprobs
    from tests.test_learner_packing import _random_llama, _rows
    model = _random_llama()
    args, groups = _rows(model.config.vocab_size)
    want, want_ent = completion_logprobs(model, *args, groups, entropy=True, packing=True)
    lazy = torch.device("lazy")
    model.to(lazy)
    on = [a.to(lazy) for a in args]
    logp, ent = completion_logprobs(model, *on, groups.to(lazy), entropy=True, packing=True)
    logp.sum().backward()  # a CPU tensor anywhere in the graph raises, as on CUDA
    assert logp.device.type == ent.device.type == "lazy"
    assert all(p.grad.device.type == "lazy" for p in model.parameters())
    assert torch.allclose(logp.cpu(), want, atol=1e-5), (logp.cpu() - want).abs().max()
    assert torch.allclose(ent.cpu(), want_ent, atol=1e-4)
    try:
        completion_logprobs(model, *args, groups, packing=True)  # CPU rows, lazy model
    except RuntimeError as e:
        assert "lazy" in str(e), e
    else:
        raise AssertionError("a CPU batch on a lazy model did not raise")
    print("ok")
""")


def test_the_packed_path_makes_every_tensor_on_the_models_device():
    """On torch's lazy device, which refuses a CPU tensor as CUDA does (a subprocess: the
    backend stays out of the other tests' process)."""
    h.run_script_printing_ok(LAZY)
