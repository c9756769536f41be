"""Off-policy corrections in the update, end to end with the tiny model: the truncated
importance-sampling correction for the engine/trainer mismatch (``--is-correction``) and the
one-step off-policy mode (``--async-steps 1``)."""

import math

import pytest
import torch

from learner.sampling.engine import HFEngine
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h
from tests.test_learner_trainer import record_loss_calls


def trainer(tmp_path, seed=0, **overrides):
    cfg = h.config(tmp_path, **{"eval": False, **overrides})
    return GRPOTrainer(cfg, model=h.model(seed), tokenizer=h.tokenizer(), env=h.ShortEnv())


# -- --is-correction ---------------------------------------------------------------------------
def test_without_a_correction_the_update_passes_no_weights_and_logs_none(tmp_path, monkeypatch):
    t = trainer(tmp_path, steps=1)
    assert t.config.is_correction == "auto" and t.config.is_mode == "none"  # hf samples
    calls = record_loss_calls(monkeypatch)
    metrics = t.train_step().metrics
    assert calls and all(call["kwargs"]["is_weights"] is None for call in calls)
    assert torch.equal(calls[0]["old"], calls[0]["logp"])  # the first pass, as before
    assert not any(k.startswith("rollout/is_") for k in metrics)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_with_hf_sampling_the_corrected_loss_is_the_uncorrected_one(tmp_path, level):
    """The learner's own loop samples what the loss passes score (float noise: below 1e-4 per
    token, as test_vllm_engine's ATOL, so below 1e-3 over a completion's 8 tokens): the weights
    are 1 within 1e-3, the loss within 1e-4 relative and the gradient within 1e-4 of its
    largest entry."""
    plain = trainer(tmp_path / "plain", steps=1, beta=0.04)
    plain.policy_is_reference = False  # every row computed, the KL term included
    _, _, batch = h.step_batch(plain)
    batch.advantages = batch.advantages + 0.3  # centred advantages would make the loss 0 anyway
    corrected = trainer(tmp_path / level, steps=1, beta=0.04, is_correction=level)
    corrected.policy_is_reference = False
    for t in (plain, corrected):  # keep the weights and the gradients: compare the gradients
        t.update.optimizer.step = lambda: None
        t.update.optimizer.zero_grad = lambda set_to_none=True: None
    want, got = plain.update(batch), corrected.update(batch)
    assert got.is_correction["rollout/is_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    assert got.is_correction["rollout/is_clipped_frac"] == 0.0
    assert abs(want.loss) > 1e-3
    assert got.loss == pytest.approx(want.loss, rel=1e-4)
    assert got.grad_norm == pytest.approx(want.grad_norm, rel=1e-4)
    grads = [torch.cat([p.grad.flatten() for p in t.policy.parameters()])
             for t in (plain, corrected)]
    assert torch.allclose(grads[1], grads[0], rtol=0, atol=1e-4 * float(grads[0].abs().max()))


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_the_weights_are_measured_and_capped(tmp_path, level):
    """An engine whose log-probs are 0.5 below the trainer's on every token: per token the
    ratio is e^0.5 = 1.65, above a cap of 1.5 (all cut); per sequence e^(0.5 n), cut for
    n >= 1 at a cap of 1.5 too, and at a cap of 3 only from n = 3 on."""
    for cap in (1.5, 3.0):
        t = trainer(tmp_path / f"{level}-{cap}", steps=1, beta=0.0, is_correction=level,
                    is_cap=cap)
        _, _, batch = h.step_batch(t)
        own = batch.loss_mask.bool()
        batch.sampling_logprobs = batch.sampling_logprobs - 0.5 * own
        stats = t.update(batch)
        if level == "token":
            raw = torch.full((int(own.sum()),), math.exp(0.5), dtype=torch.float64)
        else:
            raw = (0.5 * own.sum(-1)[own.any(-1)].double()).exp()
        want_mean = float(raw.clamp(max=cap).mean())
        want_cut = float((raw > cap).double().mean())
        assert stats.is_correction["rollout/is_weight_mean"] == pytest.approx(want_mean, rel=1e-3)
        assert stats.is_correction["rollout/is_clipped_frac"] == pytest.approx(want_cut)


def test_a_step_with_the_correction_logs_its_weights(tmp_path):
    metrics = trainer(tmp_path, steps=1, is_correction="sequence").train_step().metrics
    assert metrics["rollout/is_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    assert metrics["rollout/is_clipped_frac"] == 0.0


# -- --async-steps 1 ---------------------------------------------------------------------------
def _scored(model, roll, groups):
    from learner.training.forward import completion_logprobs

    with torch.no_grad():
        logp, _ = completion_logprobs(model, roll.prompt_ids, roll.prompt_mask,
                                      roll.completion_ids, roll.completion_mask, groups)
    return logp


def test_at_staleness_0_the_ratio_and_loss_are_the_synchronous_ones(tmp_path, monkeypatch):
    """An --async-steps 1 run's first step trains on samples of its own policy (staleness 0):
    the same samples, ratio, loss and updated weights as --async-steps 0, bit for bit, while
    the next step's draw runs beside it."""
    calls = record_loss_calls(monkeypatch)
    sync = trainer(tmp_path / "sync", steps=2)  # each seeds the global RNG as it starts
    want = sync.train_step()
    n = len(calls)
    ahead = trainer(tmp_path / "ahead", steps=2, async_steps=1)
    got = ahead.train_step()
    assert ahead.ahead.pending  # step 1's samples were being drawn during this update
    assert got.metrics["rollout/staleness"] == 0
    assert "rollout/staleness" not in want.metrics
    assert torch.equal(got.samples.rollout.completion_ids, want.samples.rollout.completion_ids)
    for a, b in zip(calls[:n], calls[n:], strict=True):
        assert torch.equal(b["old"], b["logp"])  # the first pass: today's ratio
        assert torch.equal(a["old"], b["old"]) and torch.equal(a["logp"], b["logp"])
    for key in ("loss", "kl", "clip_frac", "grad_norm"):
        assert got.metrics[key] == want.metrics[key], key
    for a, b in zip(sync.policy.parameters(), ahead.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    ahead.close()


def test_one_step_off_policy_samples_with_the_weights_before_the_update(tmp_path, monkeypatch):
    steps = 4
    t = trainer(tmp_path, steps=steps, async_steps=1, beta=0.04)
    initial = h.model()  # the weights step 0 starts from (the trainer's are a copy of these)
    calls = record_loss_calls(monkeypatch)
    first = t.train_step()
    after_first = h.model()
    after_first.load_state_dict(t.policy.state_dict())
    n = len(calls)
    second = t.train_step()
    # The second step's samples were drawn with step 0's weights, not with the policy it trains.
    roll, groups = second.samples.rollout, second.samples.groups
    own = roll.completion_mask.bool()
    drawn = roll.logprobs[own]
    assert torch.allclose(_scored(initial, roll, groups)[own], drawn, atol=1e-4)
    assert (_scored(after_first, roll, groups)[own] - drawn).abs().max() > 1e-2
    assert [first.metrics["rollout/staleness"], second.metrics["rollout/staleness"]] == [0, 1]
    # Stale samples: the ratio's denominator is the sampling policy's log-probs.
    assert torch.equal(calls[n]["old"], second.batch.sampling_logprobs)
    rest = [t.train_step() for _ in range(steps - 2)]
    metrics = [s.metrics for s in (first, second, *rest)]
    assert [m["rollout/staleness"] for m in metrics] == [0, 1, 1, 1]
    assert all(math.isfinite(m["loss"]) and not m["skipped"] for m in metrics)
    assert not t.ahead.pending  # nothing drawn past the last step
    assert t.stream.position == steps * t.config.prompts_per_step
    t.close()


class CopyEngine(HFEngine):
    """A stand-in for the vLLM engine: its own copy of the weights, overwritten by ``sync``."""

    name = "copy"

    def __init__(self, model):
        super().__init__(model)
        self.drawing, self.syncs = False, 0

    def decode(self, ids, mask, **kwargs):
        self.drawing = True
        try:
            return super().decode(ids, mask, **kwargs)
        finally:
            self.drawing = False

    def sync(self, policy):
        assert not self.drawing, "synced while a draw was sampling with the engine"
        self.model.load_state_dict(policy.state_dict())
        self.syncs += 1

    def close(self):
        pass


def test_a_synced_engine_is_synced_one_step_late(tmp_path):
    cfg = h.config(tmp_path, eval=False, steps=3, async_steps=1)
    engine = CopyEngine(h.model())
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv(),
                    engine=engine)
    initial = h.model()
    first = t.train_step()
    after_first = h.model()
    after_first.load_state_dict(t.policy.state_dict())
    second, third = t.train_step(), t.train_step()
    # Synced at the start, then once, when the third step's draw began: one step late.
    assert engine.syncs == 2
    assert "time/engine_sync_s" not in first.metrics and "time/engine_sync_s" in second.metrics
    for step, weights in ((second, initial), (third, after_first)):
        roll, own = step.samples.rollout, step.samples.rollout.completion_mask.bool()
        drawn = roll.logprobs[own]
        assert torch.allclose(_scored(weights, roll, step.samples.groups)[own], drawn, atol=1e-4)
    assert [s.metrics["rollout/staleness"] for s in (first, second, third)] == [0, 1, 1]
    t.close()


def test_stale_samples_with_the_correction_use_the_decoupled_objective(tmp_path, monkeypatch):
    """With --is-correction the ratio stays against the policy the update starts at, and the
    truncated weight pi_first / pi_sampling corrects for the older sampling policy."""
    t = trainer(tmp_path, steps=2, async_steps=1, is_correction="token", is_cap=2.0)
    t.train_step()
    calls = record_loss_calls(monkeypatch)
    step = t.train_step()
    call, batch = calls[0], step.batch
    assert torch.equal(call["old"], call["logp"])  # the first pass
    want = torch.exp(call["logp"] - batch.sampling_logprobs).clamp(max=2.0)
    mask = batch.loss_mask.bool()
    assert torch.allclose(call["kwargs"]["is_weights"][mask], want[mask], rtol=1e-6)
    assert step.metrics["rollout/staleness"] == 1
    assert step.metrics["rollout/is_weight_mean"] != pytest.approx(1.0, abs=1e-3)
    t.close()


def test_a_checkpoint_during_a_draw_saves_the_trained_steps_position(tmp_path):
    import json

    from learner import run_layout

    t = trainer(tmp_path, steps=3, async_steps=1)
    t.train_step()
    assert t.ahead.pending
    t.save()
    state = json.loads((run_layout.latest(t.config.output_dir) / run_layout.STATE_FILE)
                       .read_text())
    assert state["position"] == t.config.prompts_per_step  # not the draw's prompts
    t.close()


def test_the_flags_are_refused_in_one_line_where_they_cannot_work(monkeypatch, capsys):
    from learner.config import parse_config

    cases = [({"WORLD_SIZE": "2"}, ["--async-steps", "1"], "--async-steps 1 runs in one process"),
             ({"ACCELERATE_USE_DEEPSPEED": "true"}, ["--async-steps", "1"], "without DeepSpeed"),
             ({}, ["--async-steps", "2"], "invalid choice"),
             ({}, ["--is-cap", "0"], "--is-cap must be > 0"),
             ({}, ["--is-correction", "yes"], "invalid choice")]
    for env, argv, message in cases:
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            with pytest.raises(SystemExit):
                parse_config(argv)
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 2, err  # the error and the --help hint
    assert parse_config(["--async-steps", "1", "--is-correction", "token"]).is_cap == 3.0
