"""Micro-batches under a token budget (``--micro-batch-tokens``): peak memory follows the budget,
the gradient does not change, and the peak is logged and estimated before the first step."""

from __future__ import annotations

import resource
from types import SimpleNamespace

import pytest
import torch

from learner.training import memory_plan
from learner.training.batching import Batch
from tests.test_learner_trainer import assert_same_gradient, trainer, update_gradient


def _batch(prompt_lens: list[int], completion_lens: list[int], groups: list[int]) -> Batch:
    """Left-padded prompts, right-padded completions, ids = the row's index."""
    n, p, t = len(groups), max(prompt_lens), max(completion_lens)
    prompt_mask = torch.zeros(n, p, dtype=torch.long)
    completion_mask = torch.zeros(n, t, dtype=torch.long)
    for i, (a, b) in enumerate(zip(prompt_lens, completion_lens, strict=True)):
        prompt_mask[i, p - a:] = 1
        completion_mask[i, :b] = 1
    ids = torch.arange(n).unsqueeze(-1)
    return Batch(ids.expand(n, p).clone(), prompt_mask, ids.expand(n, t).clone(), completion_mask,
                 completion_mask.clone(), torch.ones(n), torch.tensor(groups), 6.0, 21.0,
                 torch.zeros(n, t))


def test_positions_count_a_groups_prompt_once():
    b = _batch([5, 5, 3], [2, 4, 1], [0, 0, 1])
    assert b.positions().tolist() == [5 + 2, 4, 3 + 1]


def test_split_by_tokens_fits_the_budget_and_keeps_every_row_once():
    b = _batch([6] * 4 + [2] * 4, [1, 9, 3, 3, 8, 2, 2, 5], [0] * 4 + [1] * 4)
    cost = b.positions().tolist()  # [7, 9, 3, 3, 10, 2, 2, 5]
    parts = b.parts_for(12)
    assert parts == 5  # greedy contiguous runs: [7] [9, 3] [3] [10, 2] [2, 5]... within 12
    micro = b.split_by_tokens(parts)
    assert len(micro) == parts
    assert torch.cat([mb.groups for mb in micro]).tolist() == b.groups.tolist()
    assert all(mb.n_sequences == 6.0 and mb.n_tokens == 21.0 for mb in micro)  # whole-batch norms
    sums, start = [], 0
    for mb in micro:  # each part's rows are the next rows, and their cost is within the budget
        sums.append(sum(cost[start:start + len(mb)]))
        assert mb.prompt_ids[:, -1].tolist() == list(range(start, start + len(mb)))
        start += len(mb)
    assert max(sums) <= 12
    assert b.parts_for(0) == 1 and len(b.split_by_tokens(1)) == 1


def test_split_by_tokens_makes_exactly_the_parts_asked_with_the_smallest_largest_part():
    b = _batch([1] * 6, [10, 1, 1, 1, 1, 10], [0, 1, 2, 3, 4, 5])
    micro = b.split_by_tokens(3)
    assert [len(mb) for mb in micro] == [1, 4, 1]  # 11 | 8 | 11: no split has a smaller maximum
    assert [len(mb) for mb in b.split_by_tokens(6)] == [1] * 6
    assert len(b.split_by_tokens(10)) == 6  # never an empty part


def test_a_part_is_trimmed_to_its_own_rows_padding():
    b = _batch([8, 8, 2, 2], [12, 12, 3, 3], [0, 0, 1, 1])
    long, _, short, _ = b.split_by_tokens(4)
    assert long.prompt_ids.shape == (1, 8) and long.completion_ids.shape == (1, 12)
    assert short.prompt_ids.shape == (1, 2) and short.completion_ids.shape == (1, 3)
    assert short.loss_mask.shape == (1, 3) and short.sampling_logprobs.shape == (1, 3)
    assert bool(short.prompt_mask.all()) and bool(short.completion_mask.all())
    assert short.prompt_ids.tolist() == [[2, 2]]  # the row's own tokens, not another's


def test_the_token_budget_leaves_the_gradient_as_one_whole_batch(tmp_path):
    """The micro-batch property on a model loaded with from_pretrained: the step's rows in one
    loss pass, or in as many as a tiny budget makes, give the same gradient."""
    grads, passes = [], []
    for budget in (0, 24):
        t = trainer(tmp_path / str(budget), steps=1, eval=False, micro_batch_tokens=budget,
                    max_grad_norm=0.0, learning_rate=1e-9)
        calls: list[int] = []

        def counted(*a, _real=t.update.logprobs, _calls=calls, **k):
            _calls.append(1)
            return _real(*a, **k)

        t.update.logprobs = counted
        grads.append(update_gradient(t))
        passes.append(len(calls))
    assert passes[0] == 1 and passes[1] > 2  # the budget did split the step
    assert_same_gradient(*grads)


def test_every_step_logs_the_peak_resident_memory_in_metrics_progress_and_plots(tmp_path):
    from learner import plot
    from learner.training.loop import progress as _progress
    from learner.training.run_log import read_metrics

    t = trainer(tmp_path, steps=1, eval=False)
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert 0.1 < row["memory/peak_rss_gb"] <= peak_kib * 1024 / 1e9  # torch and a model at least
    assert _progress(row)["mem"] == f"{row['memory/peak_rss_gb']:.1f}G"
    assert "memory.png" in {p.name for p in plot.plot(tmp_path / "run")}


SMOL = SimpleNamespace(num_hidden_layers=30, hidden_size=576, intermediate_size=1536,
                       num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                       vocab_size=49152)


def test_the_memory_estimate_by_hand():
    plan = memory_plan.estimate(SMOL, trainable=100, total=100, reference=True, rows=2,
                                context=10, micro_batch_tokens=8, completion_share=0.5)
    assert plan.resident == 4 * (100 + 300 + 100)
    assert plan.sampling == 4 * 2 * 10 * 30 * 2 * 3 * 64 + 4 * 2 * 49152 * 4
    # fp32 activations per layer and position, the final hidden states twice, and the logits
    # of the 4 scored positions (one chunk: never more than 2^27 / 49152 = 2730 rows), in 2
    # copies, and 2 copies of the head's gradient (full fine-tuning: 100 of 100 trained).
    per_position = 4 * (30 * (14 * 576 + 5 * 1536) + 2 * 576)
    logits = 2 * 4 * 4 * 49152 + 2 * 4 * 49152 * 576
    assert plan.per_position == per_position
    assert plan.loss_pass == pytest.approx(8 * per_position + logits)
    whole = memory_plan.estimate(SMOL, trainable=100, total=100, reference=True, rows=2,
                                 context=10, micro_batch_tokens=0, completion_share=0.5)
    # rows x context positions, 10 of them scored
    assert whole.loss_pass == pytest.approx(20 * per_position + 2 * 4 * 10 * 49152
                                            + 2 * 4 * 49152 * 576)
    assert plan.peak == memory_plan.BASE_BYTES + plan.resident + max(plan.sampling,
                                                                      plan.loss_pass)


def test_a_run_the_machine_cannot_hold_says_so_with_the_flag_that_lowers_it():
    # The design card's command before the budget: 64 rows of 352 + 64 tokens in one pass.
    whole = memory_plan.estimate(SMOL, trainable=134_515_008, total=134_515_008, reference=True,
                                 rows=64, context=416, micro_batch_tokens=0)
    line = memory_plan.warning(whole, 12e9, 0)
    assert line is not None and "\n" not in line
    assert "--micro-batch-tokens" in line and "12.0 GB" in line
    budgeted = memory_plan.estimate(SMOL, trainable=134_515_008, total=134_515_008,
                                    reference=True, rows=64, context=416,
                                    micro_batch_tokens=1024)
    assert budgeted.peak < 8e9 < whole.peak
    assert memory_plan.warning(budgeted, 24e9, 1024) is None


def test_the_trainer_warns_before_the_first_step_when_memory_is_short(tmp_path, capsys,
                                                                     monkeypatch):
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=0))
    monkeypatch.setattr(memory_plan, "BASE_BYTES", 64e9)  # more than any machine here has free
    t = trainer(tmp_path, steps=1, eval=False)
    out = capsys.readouterr().out
    # Nothing is left beside the resident part: the line names the flag that shrinks it.
    assert "warning: this run's estimated peak memory" in out and "--lora-r 16" in out
    assert t.memory_plan.peak > 64e9


def test_the_memory_estimate_by_hand_under_autocast_and_checkpointing():
    kwargs = dict(trainable=100, total=50_000_000, reference=True, rows=64, context=200,
                  micro_batch_tokens=1000, completion_share=0.5)
    fp32 = memory_plan.estimate(SMOL, **kwargs)
    bf16 = memory_plan.estimate(SMOL, autocast=True, **kwargs)
    embedding = 49152 * 576  # stays fp32 in the reference; its matmul weights are bf16
    assert fp32.resident - bf16.resident == 2 * (50_000_000 - embedding)
    # The norms and residual stream stay fp32; the rest of a layer's activations halve.
    layer = 4 * 576 * 4 + 10 * 576 * 2 + 5 * 1536 * 2
    assert bf16.per_position == 30 * layer + 2 * 576 * 4
    # autocast's bf16 copies of the weights, one chunk of 500 scored positions' logits (2
    # fp32 copies); only 100 of the weights train: no head gradient
    assert bf16.loss_pass == 1000 * bf16.per_position + 2 * 50_000_000 + 8 * 500 * 49152
    no_reference = memory_plan.estimate(SMOL, autocast=True, **{**kwargs, "reference": False})
    assert bf16.resident - no_reference.resident == 2 * (50_000_000 - embedding) + 4 * embedding
    # Checkpointing: each layer's fp32 input, one layer recomputed, the final hidden states;
    # each row runs its 100-token prompt (a completion counted as 50 tokens, G = 8).
    ckpt = memory_plan.estimate(SMOL, autocast=True, checkpointing=True, prompt=100,
                                group_size=8, **kwargs)
    assert ckpt.checkpointing and ckpt.per_position == pytest.approx(
        (30 * 576 * 4 + layer + 2 * 576 * 4) * 150 / (100 / 8 + 50))
    assert ckpt.per_position < bf16.per_position / 3
    # A step of 2500 positions under a 1000-position budget runs in 3 passes of 834.
    split = memory_plan.estimate(SMOL, step_positions=2500, **kwargs)
    assert split.loss_pass - fp32.loss_pass == pytest.approx(
        (834 - 1000) * fp32.per_position + (417 - 500) * 8 * 49152)


def test_the_plan_turns_checkpointing_on_only_when_it_then_fits():
    def make(checkpointing):
        return memory_plan.estimate(SMOL, trainable=134_515_008, total=134_515_008,
                                    reference=True, rows=64, context=416,
                                    micro_batch_tokens=8192, checkpointing=checkpointing,
                                    prompt=96, group_size=8)
    off, on = make(False).peak, make(True).peak
    assert on < off
    assert not memory_plan.within(make, off, False).checkpointing  # fits: left off
    assert memory_plan.within(make, (on + off) / 2, False).checkpointing
    assert not memory_plan.within(make, on / 2, False).checkpointing  # neither fits
    assert memory_plan.within(make, off, True).checkpointing  # asked for: kept


def _param_count(config):
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):  # the shape only: no memory, no weights
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())


def test_qwen_0_5b_and_1_5b_fit_80_gb_beside_vllm_on_every_gpu_recipe():
    """The GPU recipes (envs/domains/*.toml [gpu], with each pack's [recipe.gpu]) at Qwen2.5
    0.5B and 1.5B: bf16 autocast, vLLM colocated with 0.25 of an 80 GB card, so the learner
    has 60 GB; prompts of 256 tokens (GSM8K's chat prompts are about 150)."""
    import tomllib
    from pathlib import Path

    from scripts.gpucheck.assets import shape

    recipes = {p.stem: tomllib.loads(p.read_text())["gpu"] for p in (Path(__file__).resolve().parents[1] / "envs" / "domains").rglob("*.toml")}
    assert len(recipes) >= 5
    budget, prompt = 60e9, 256
    for name in ("qwen2.5-0.5b", "qwen2.5-1.5b"):
        config = shape(name)
        params = _param_count(config)
        for recipe, r in recipes.items():
            rows = r["prompts_per_step"] * r["group_size"]

            def make(checkpointing, r=r, rows=rows, config=config, params=params):
                return memory_plan.estimate(
                    config, trainable=params, total=params, reference=r["beta"] > 0,
                    rows=rows, context=prompt + r["max_new_tokens"],
                    micro_batch_tokens=r["micro_batch_tokens"], autocast=True,
                    checkpointing=checkpointing, prompt=prompt, group_size=r["group_size"],
                    kv_cache=False, step_positions=r["prompts_per_step"] * (
                        prompt + r["group_size"] * r["max_new_tokens"]))
            plan = memory_plan.within(make, budget, False)
            assert plan.peak <= budget, (name, recipe, plan)
            if name == "qwen2.5-1.5b" and r["max_new_tokens"] == 512:
                assert plan.checkpointing  # at 16384 tokens a pass it fits only so
