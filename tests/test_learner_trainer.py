"""End-to-end GRPO steps with the tiny model on test envs with controllable rewards."""

import json
import math
import warnings

import pytest
import torch

from envs.verify.verdict import Verdict
from learner.training import update
from learner.training.run_log import read_metrics
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h

REQUIRED = ["step", "reward/mean", "reward/std", "reward/short", "reward/digit", "group/std_mean",
            "group/frac_zero_std", "kl", "loss", "clip_frac", "entropy", "completion/len_mean",
            "completion/truncated_frac", "lr", "grad_norm", "time/step_s", "time/generate_s",
            "time/score_s", "time/train_s", "tokens_per_s"]


class HalfFlatEnv(h.ShortEnv):
    """Flat groups (every completion scored alike) on tasks with an even answer, ShortEnv's
    dense reward (a spread in every group) on the others."""

    def grade(self, task, completion):
        if int(task["answer"]) % 2 == 0:
            return {"short": 1.0, "digit": 0.0}, Verdict.fail("not_equal")
        return super().grade(task, completion)


def record_loss_calls(monkeypatch) -> list[dict]:
    """Every ``grpo_loss`` call of the loss passes: its arguments and what it returned."""
    real, calls = update.grpo.grpo_loss, []

    def spy(logp, old_logp, ref_logp, advantages, mask, **kwargs):
        loss, aux = real(logp, old_logp, ref_logp, advantages, mask, **kwargs)
        calls.append({"logp": logp.detach(), "old": old_logp, "ref": ref_logp,
                      "advantages": advantages, "mask": mask, "kwargs": kwargs, "aux": aux})
        return loss, aux

    monkeypatch.setattr(update.grpo, "grpo_loss", spy)
    return calls


def trainer(tmp_path, env=None, seed=0, accelerator=None, **overrides):
    cfg = h.config(tmp_path, **overrides)
    return GRPOTrainer(cfg, model=h.model(seed), tokenizer=h.tokenizer(),
                       env=env or h.ShortEnv(), accelerator=accelerator)


def test_training_logs_every_metric_and_changes_the_policy(tmp_path):
    t = trainer(tmp_path, eval_size=2)
    before = [p.detach().clone() for p in t.policy.parameters()]
    result = t.train()
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [0, 1, 2]
    for key in REQUIRED:
        assert key in rows[1], key
    assert "eval/accuracy" in rows[0] and "eval/accuracy" in rows[2]
    assert rows[2]["kl"] > 0  # the policy moved away from the reference
    assert any(not torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))
    assert set(result) >= {"before", "after"}
    samples = [json.loads(line) for line in (tmp_path / "run/samples.jsonl").read_text().splitlines()]
    assert {"prompt", "completions", "rewards", "advantages"} <= set(samples[0])
    assert len(samples[0]["completions"]) == 4


def _sequence_logprobs(t, batch):
    with torch.no_grad():
        logp, _ = t.update.logprobs(t.update.model, batch)
    return (logp * batch.loss_mask).sum(-1) / batch.loss_mask.sum(-1)


def test_an_update_favours_completions_with_positive_advantage(tmp_path):
    t = trainer(tmp_path, steps=1, prompts_per_step=2, group_size=6, learning_rate=1e-3,
                beta=0.0, eval=False)
    _, _, batch = h.step_batch(t)
    before = _sequence_logprobs(t, batch)
    stats = t.update(batch)
    assert stats.kl is None  # beta == 0: no reference, so no KL is reported as measured
    delta = _sequence_logprobs(t, batch) - before
    up, down = delta[batch.advantages > 0], delta[batch.advantages < 0]
    assert up.mean() > 0 > down.mean(), (up, down)


def test_flat_step_without_kl_is_skipped_and_logged_as_skipped(tmp_path):
    # beta == 0 and every group flat: no row has a loss, so nothing is computed or changed.
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=1, eval=False, beta=0.0)
    before = [p.detach().clone() for p in t.policy.parameters()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t.train()
    # The schedule still counts the step, without torch's warning about the order of calls.
    assert t.update.scheduler.scheduler.last_epoch == 1
    assert not [w for w in caught if "lr_scheduler" in str(w.message)], caught
    row = read_metrics(tmp_path / "run")[-1]
    assert row["group/frac_zero_std"] == 1.0 and row["group/trained"] == 0
    assert row["skipped"] is True and row["kl"] is None and row["loss"] is None
    assert all(torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))


def test_flat_groups_keep_their_kl_term(tmp_path):
    # With beta > 0 the loss of a flat group is beta * KL: once the policy has moved away from
    # the reference, the groups are trained, not dropped, and their KL pulls the policy back.
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=1, eval=False, beta=0.1, loss_type="dapo")
    h._moved(t.policy)  # as after updates
    t.update.policy_is_reference = False
    _, adv, batch = h.step_batch(t)
    assert batch is not None and len(batch) == 8 and not adv.any()
    assert batch.n_sequences == 8 and batch.n_tokens == float(batch.loss_mask.sum())
    with torch.no_grad():
        ref = t.update.ref_logprobs(batch)
        start = t.update.logprobs(t.update.model, batch)[0]
    m = batch.loss_mask.bool()
    d = ref - start
    kl = float((torch.exp(d) - d - 1)[m].mean())  # DAPO: a mean over the step's tokens
    stats = t.update(batch)
    assert kl > 0 and stats.kl == pytest.approx(kl, rel=1e-4)
    assert stats.loss == pytest.approx(0.1 * kl, rel=1e-4)  # all of it the KL term
    with torch.no_grad():
        after = t.update.logprobs(t.update.model, batch)[0]
    d = ref - after
    assert float((torch.exp(d) - d - 1)[m].mean()) < kl  # the step moved toward the reference


def test_a_flat_step_before_any_update_changes_nothing_even_with_kl(tmp_path):
    # The policy is still the reference: its KL and the KL's gradient are exactly 0, so a step
    # of flat groups has nothing to learn. Computing it anyway turned float noise in the
    # reference pass into a full-size AdamW step.
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=2, eval=False, beta=0.1)
    before = [p.detach().clone() for p in t.policy.parameters()]
    t.train()
    rows = read_metrics(tmp_path / "run")
    assert [r["skipped"] for r in rows] == [True, True]
    assert all(torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))
    assert t.update.policy_is_reference


def test_the_reference_pass_runs_once_the_policy_has_moved(tmp_path, monkeypatch):
    t = trainer(tmp_path, steps=2, eval=False, beta=0.1, learning_rate=1e-3)
    calls = []
    real = t.update.ref_logprobs
    monkeypatch.setattr(t.update, "ref_logprobs", lambda mb: calls.append(1) or real(mb))
    first = t.train_step().metrics
    assert calls == [] and first["kl"] == 0.0  # step 0: the reference is the policy itself
    assert not t.update.policy_is_reference
    second = t.train_step().metrics
    assert calls and second["kl"] > 0


def test_dynamic_sampling_draws_more_prompts_when_groups_are_flat(tmp_path):
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=1, eval=False, dynamic_sampling=True,
                max_sampling_tries=3)
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    assert row["group/sampling_tries"] == 3
    assert t.stream.position == 2 * 3  # P fresh prompts on each try


def test_dynamic_sampling_trains_the_first_p_groups_with_a_reward_spread(tmp_path):
    # The seed-0 stream of arith level 1 answers 10, 9 | 2 | 13, ...: the first round has one
    # informative group (9), the second none (2), the third one more (13).
    t = trainer(tmp_path, env=HalfFlatEnv(), steps=1, eval=False, dynamic_sampling=True,
                max_sampling_tries=4, prompts_per_step=2, group_size=4,
                dynamic_sampling_metric="reward")
    samples, adv, batch = h.step_batch(t)
    assert [task["answer"] for task in samples.tasks] == ["10", "9", "2", "13"]
    assert samples.tries == 3 and t.stream.position == 4  # P, then P - 1 informative, then 1
    assert samples.informative.tolist() == [False, True, False, True]
    # Only the two informative groups are in the step: trained, and counted in the normaliser.
    assert batch.groups.unique().tolist() == [1, 3]
    assert batch.n_sequences == 2 * 4 and batch.n_tokens == float(batch.loss_mask.sum())
    assert (adv[:4] == 0).all() and (adv[8:12] == 0).all() and adv[4:8].abs().sum() > 0
    before = [p.detach().clone() for p in t.policy.parameters()]
    t.update(batch)
    assert any(not torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))


def test_flat_rows_are_computed_at_step_0_when_later_iterations_need_their_kl(
        tmp_path, monkeypatch):
    # At step 0 the policy is the reference, so a flat row adds exactly nothing to the first
    # iteration; after its optimizer step it adds its KL term to the second.
    t = trainer(tmp_path, env=HalfFlatEnv(), steps=1, eval=False, beta=0.1, num_iterations=2,
                prompts_per_step=4)
    samples, adv, batch = h.step_batch(t)
    flat = adv == 0
    assert flat.any() and (~flat).any()  # answers 10, 9, 2, 13: two flat groups
    assert len(batch) == len(adv)  # every row is computed, the flat ones too
    calls = record_loss_calls(monkeypatch)
    t.update(batch)
    second = calls[-1]
    rows = (second["advantages"] == 0).unsqueeze(-1) & second["mask"].bool()
    assert float(second["aux"]["kl"].detach()[rows].sum()) > 0  # the flat rows' KL counts
    # One iteration: the flat rows add nothing at step 0 and are left out.
    one = trainer(tmp_path / "one", env=HalfFlatEnv(), steps=1, eval=False, beta=0.1,
                  prompts_per_step=4)
    _, adv, batch = h.step_batch(one)
    assert len(batch) == int((adv != 0).sum())


def test_two_iterations_reuse_the_first_pass_log_probs_and_step_twice(tmp_path, monkeypatch):
    t = trainer(tmp_path, steps=1, eval=False, num_iterations=2)
    steps = []
    real_step = t.update.optimizer.step
    monkeypatch.setattr(t.update.optimizer, "step", lambda: steps.append(1) or real_step())
    calls = record_loss_calls(monkeypatch)
    t.train_step()
    assert len(steps) == 2 and t.update.scheduler.scheduler.last_epoch == 2
    first, second = calls
    assert torch.equal(first["old"], first["logp"])  # the generating policy's own pass
    assert torch.equal(second["old"], first["logp"])  # ... reused, not recomputed
    mask = second["mask"].bool()
    assert not torch.allclose(second["logp"][mask], second["old"][mask])  # the policy moved


def test_the_loss_scores_under_the_sampling_temperature_and_top_p(tmp_path, monkeypatch):
    # The ratio's old log-probs (the first loss pass) are those of the distribution sampled
    # from: generation recorded them at the run's temperature and top-p.
    t = trainer(tmp_path, steps=1, eval=False, temperature=0.6, top_p=0.85, beta=0.04)
    t.update.policy_is_reference = False  # every row is computed, in the rollout's order
    samples, _, batch = h.step_batch(t)
    assert len(batch) == len(samples.rollout.texts)
    calls = record_loss_calls(monkeypatch)
    t.update(batch)
    old, mask = calls[0]["old"], batch.loss_mask.bool()
    assert torch.allclose(old[mask], samples.rollout.logprobs[mask], atol=2e-4)


def test_gspo_clips_whole_sequences_at_the_papers_range(tmp_path, monkeypatch):
    t = trainer(tmp_path, steps=1, eval=False, importance_sampling_level="sequence",
                num_iterations=2)
    assert (t.config.eps_low, t.config.eps_high) == (3e-4, 4e-4)
    calls = record_loss_calls(monkeypatch)
    metrics = t.train_step().metrics
    last = calls[-1]  # the second iteration: the policy has moved since the samples
    assert last["kwargs"]["importance_level"] == "sequence"
    logp, old, mask, adv = last["logp"], last["old"], last["mask"], last["advantages"]
    rows = mask.sum(-1) > 0
    ratio = torch.exp(((logp - old) * mask).sum(-1) / mask.sum(-1).clamp(min=1))
    want = ((adv > 0) & (ratio > 1 + 4e-4)) | ((adv < 0) & (ratio < 1 - 3e-4))
    clipped = last["aux"]["clipped"]
    for i in rows.nonzero().squeeze(-1).tolist():  # a whole sequence is clipped, or none of it
        assert set(clipped[i][mask[i].bool()].tolist()) == {bool(want[i])}, i
    assert want[rows].any()
    assert metrics["clip_frac/sequence"] == pytest.approx(float(want[rows].float().mean()))


def test_dr_grpo_has_no_std_scaling_unless_asked(tmp_path):
    for scale, divided in ((None, False), ("group", True)):
        t = trainer(tmp_path / str(scale), steps=1, eval=False, loss_type="dr_grpo",
                    scale_rewards=scale)
        samples = t.collect()
        rewards, groups = samples.rewards, samples.groups
        mean = torch.stack([rewards[groups == g].mean() for g in groups.tolist()])
        std = torch.stack([rewards[groups == g].std() for g in groups.tolist()])
        want = (rewards - mean) / (std + 1e-4) if divided else rewards - mean
        assert torch.allclose(t.advantages(samples), want.float(), atol=1e-5), scale


def test_overlong_penalty_joins_the_reward_trained_on(tmp_path):
    # L_max 8 (the budget), L_cache 4: a completion of n tokens loses (n - 4) / 4 past 4.
    t = trainer(tmp_path, steps=1, eval=False, overlong_cache=4)
    step = t.train_step()
    samples = step.samples
    lengths = samples.rollout.lengths.double()
    want = -((lengths - 4) / 4).clamp(min=0, max=1)
    env = torch.tensor(samples.scores.rewards, dtype=torch.float64)
    assert torch.allclose(samples.rewards, env + want)
    assert step.metrics["reward/overlong"] == pytest.approx(float(want.mean()))
    assert step.metrics["reward/mean"] == pytest.approx(float(env.mean()))  # the env's own


def test_accelerates_accumulation_variable_does_not_divide_the_loss_again(tmp_path,
                                                                         monkeypatch):
    # `accelerate launch --gradient_accumulation_steps 4` sets this variable; an Accelerator
    # that took it would divide every loss by 4 in backward, on top of the trainer's own
    # normalisers over its micro-batches.
    from accelerate import Accelerator

    grads = []
    for value in (None, "4"):
        if value:
            monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", value)
        t = trainer(tmp_path / str(value), steps=1, eval=False, max_grad_norm=0.0,
                    gradient_accumulation_steps=2)
        assert t.accelerator.gradient_accumulation_steps == 1
        torch.manual_seed(5)
        _, _, batch = h.step_batch(t)
        t.update.optimizer.step = lambda: None  # keep the weights; inspect the gradients
        t.update.optimizer.zero_grad = lambda set_to_none=True: None
        t.update(batch)
        grads.append(torch.cat([p.grad.flatten() for p in t.policy.parameters()]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="accumulates gradients over 4 steps"):
        trainer(tmp_path / "given", accelerator=Accelerator(cpu=True))


def test_sandbox_errors_are_dropped_not_scored_zero(tmp_path):
    import dataclasses

    t = trainer(tmp_path, steps=1, eval=False)
    samples = t.collect()
    failed = [i == 1 for i in range(8)]  # pretend the grader's sandbox failed on one sample
    samples = dataclasses.replace(samples, scores=dataclasses.replace(
        samples.scores, infra_error=failed, rewards=[0.0 if f else r for f, r in
                                                     zip(failed, samples.scores.rewards,
                                                         strict=True)]))
    adv = t.advantages(samples)
    batch = t.batch(samples, adv)
    assert adv[1] == 0.0
    assert len(batch) == 2 * 4 - 1
    rewards = samples.rewards[[0, 2, 3]]
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    assert torch.allclose(adv[[0, 2, 3]], expected.float(), atol=1e-5)


def test_env_sandbox_error_verdicts_are_detected(tmp_path, capsys):
    env = h.ShortEnv(fail_marker="")  # every completion "hits" a sandbox failure
    # --max-infra-error-rate 1: never stop (by default the first step would stop the run)
    t = trainer(tmp_path, env=env, steps=2, eval=False, max_infra_error_rate=1.0)
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    assert row["samples/infra_errors"] == 2 * 4
    assert row["group/trained"] == 0
    assert row["accuracy"] is None  # 8 of 8 failed: no accuracy, not one over 0 samples
    # The run says so once, with the sandbox's own reason, rather than only in a metric.
    notices = [line for line in capsys.readouterr().out.splitlines() if "not scored" in line]
    assert notices == ["warning: step 1: 8 of 8 samples were not scored because the sandbox "
                       "failed (cannot reach a Docker engine). They are dropped from the update "
                       "and counted in samples/infra_errors; past --max-infra-error-rate 1 of "
                       "the last 5 steps' samples the run stops."]


def test_nonfinite_loss_skips_the_update(tmp_path):
    t = trainer(tmp_path, steps=1, eval=False)
    _, _, batch = h.step_batch(t)
    batch.advantages[:] = float("nan")
    before = [p.detach().clone() for p in t.policy.parameters()]
    stats = t.update(batch)
    assert stats.nonfinite_skipped == 1 and stats.grad_norm is None
    assert all(torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))
    assert t.update.policy_is_reference  # nothing moved


def test_a_nonfinite_iteration_cancels_its_own_step_and_no_later_one(tmp_path, monkeypatch):
    # num_iterations = 2: the first iteration's loss is NaN (a bad micro-batch), the second's
    # is fine; the second iteration must still step.
    from learner.training import update

    t = trainer(tmp_path, steps=1, eval=False, num_iterations=2, gradient_accumulation_steps=2)
    _, _, batch = h.step_batch(t)
    real, calls = update.grpo.grpo_loss, []

    def first_nan(*args, **kwargs):
        loss, aux = real(*args, **kwargs)
        calls.append(1)
        return (loss * float("nan") if len(calls) == 1 else loss), aux

    monkeypatch.setattr(update.grpo, "grpo_loss", first_nan)
    steps = []
    real_step = t.update.optimizer.step
    monkeypatch.setattr(t.update.optimizer, "step", lambda: steps.append(1) or real_step())
    before = [p.detach().clone() for p in t.policy.parameters()]
    stats = t.update(batch)
    assert len(calls) == 4  # two micro-batches in each of two iterations
    assert steps == [1] and stats.nonfinite_skipped == 1 and math.isfinite(stats.grad_norm)
    assert any(not torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))


def update_gradient(t) -> torch.Tensor:
    """The flat gradient one update of a fixed step's batch leaves (weights kept as they were):
    micro-batching must leave it as it is."""
    torch.manual_seed(5)
    _, _, batch = h.step_batch(t)
    batch.advantages = torch.linspace(-1, 1, len(batch))
    t.update.optimizer.step = lambda: None  # keep the weights; inspect the gradients
    t.update.optimizer.zero_grad = lambda set_to_none=True: None
    t.update(batch)
    return torch.cat([p.grad.flatten() for p in t.policy.parameters() if p.grad is not None])


def assert_same_gradient(a: torch.Tensor, b: torch.Tensor) -> None:
    # Float32 sums in another order: entries agree within 1e-4 relative, or 1e-5 of the largest
    # gradient (one entry of 3.2 million once differed by 3.8e-7 at 1.9e-3, of 0.089 at most). A
    # loss divided once too often or too rarely is off by the number of parts.
    scale = float(a.abs().max())
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * scale)


def test_gradient_accumulation_matches_one_big_batch(tmp_path):
    grads = [update_gradient(trainer(tmp_path / str(accum), steps=1, eval=False,
                                     gradient_accumulation_steps=accum, micro_batch_tokens=0,
                                     max_grad_norm=0.0, learning_rate=1e-9))
             for accum in (1, 3)]
    assert_same_gradient(*grads)


def test_micro_batches_are_as_many_as_asked_whatever_the_rows():
    # Every process must run as many micro-batches (each ends in collectives): 5 rows in 4
    # parts are 4 parts, not the 3 that chunks of ceil(5 / 4) rows made.
    from learner.training.batching import Batch

    batch = Batch(*(torch.arange(5).unsqueeze(-1) for _ in range(7)))
    assert [len(mb) for mb in batch.split(4)] == [1, 1, 1, 2]
    assert [len(mb) for mb in batch.split(8)] == [1] * 5  # never an empty one
    assert [mb.groups.flatten().tolist() for mb in batch.split(2)] == [[0, 1], [2, 3, 4]]


def test_resume_after_kill_reproduces_the_metrics(tmp_path):
    keys = ["reward/mean", "loss", "kl", "entropy", "grad_norm", "completion/len_mean"]
    full = trainer(tmp_path / "full", steps=4, save_every=2, eval=False, samples_every=0)
    full.train()
    want = read_metrics(tmp_path / "full/run")

    part = trainer(tmp_path / "part", steps=4, save_every=2, eval=False, samples_every=0)
    part.config.steps = 3  # "killed" after step 3: step 3 is lost, the step-2 checkpoint is not
    part.train()
    (tmp_path / "part/run/checkpoints/step-0000003").rename(
        tmp_path / "part/run/checkpoints/.tmp-step-0000003")  # as if killed while writing it
    resumed = trainer(tmp_path / "part", steps=4, save_every=2, eval=False,
                      samples_every=0, resume=True)
    resumed.train()
    got = read_metrics(tmp_path / "part/run")
    assert [r["step"] for r in got] == [1, 2, 3, 4]
    for a, b in zip(want, got, strict=True):
        for k in keys:
            assert math.isclose(a[k], b[k], rel_tol=1e-5, abs_tol=1e-7), (a["step"], k)


def test_lora_and_multiple_iterations(tmp_path):
    t = trainer(tmp_path, steps=1, eval=False, lora_r=4, num_iterations=2, epsilon_high=0.28,
                loss_type="dapo", scale_rewards="none")
    base = {n: p.detach().clone() for n, p in t.policy.named_parameters() if "lora" not in n}
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    assert math.isfinite(row["loss"])
    # only adapters train; the frozen base stays the reference
    for n, p in t.policy.named_parameters():
        if n in base:
            assert torch.equal(base[n], p), n
    t.save_model(tmp_path / "merged")
    assert (tmp_path / "merged/config.json").is_file()


def test_masked_truncated_rows_leave_nothing_to_train(tmp_path):
    # The tiny model never stops within 8 tokens: with --mask-truncated no token has a loss.
    t = trainer(tmp_path, steps=1, eval=False, mask_truncated=True)
    samples, _, batch = h.step_batch(t)
    assert bool(samples.rollout.truncated.all())
    assert batch is None


def test_checkpointing_cosine_schedule_and_other_objectives(tmp_path):
    t = trainer(tmp_path, steps=2, eval=False, gradient_checkpointing=True, lr_scheduler="cosine",
                warmup_steps=1, scale_rewards="batch", loss_type="dr_grpo", top_p=0.9,
                temperature=0.7)
    t.train()
    rows = read_metrics(tmp_path / "run")
    assert rows[0]["lr"] == 1e-3  # end of the one warmup step: the peak
    assert rows[1]["lr"] < 1e-4  # cosine decays to 0 at the last step
    assert all(math.isfinite(r["loss"]) and r["group/trained"] > 0 for r in rows)


def test_a_warmup_with_the_constant_schedule_warms_up(tmp_path):
    # transformers' "constant" schedule drops num_warmup_steps: --warmup-steps did nothing.
    t = trainer(tmp_path, steps=4, eval=False, warmup_steps=2)
    assert t.config.lr_scheduler == "constant"
    rates = []
    for _ in range(3):
        rates.append(t.update.scheduler.get_last_lr()[0])
        t.update.scheduler.step()
    assert rates == [0.0, 5e-4, 1e-3]  # learning rate 1e-3, reached after 2 steps


def test_heldout_eval_logs_perturbed_prompt_scores(tmp_path):
    import gymnasium as gym

    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    t = trainer(tmp_path, env=env, steps=1, eval_size=2, max_new_tokens=8)
    t.train()
    rows = read_metrics(tmp_path / "run")
    perturbed = {k for k in rows[0] if k.startswith("eval/perturb/")}
    assert {"eval/perturb/paraphrase", "eval/perturb/no_instruction"} <= perturbed
    assert all(0.0 <= rows[0][k] <= 1.0 for k in perturbed)
    assert perturbed <= set(rows[-1])


def test_perturbed_scores_can_be_switched_off(tmp_path):
    import gymnasium as gym

    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    t = trainer(tmp_path, env=env, steps=1, eval_size=2, max_new_tokens=8,
                eval_perturbations=False)
    t.train()
    assert not any(k.startswith("eval/perturb/") for k in read_metrics(tmp_path / "run")[0])


def test_dynamic_sampling_quota_is_shared_over_processes():
    from learner.training.distributed import share_quota

    assert share_quota([5], 4) == [4]
    assert share_quota([4, 4], 4) == [2, 2]
    assert share_quota([0, 6], 4) == [0, 4]  # one process found nothing: the other fills in
    assert share_quota([1, 6, 2], 8) == [1, 5, 2]
    assert share_quota([1, 1], 8) == [1, 1]  # fewer informative groups than asked for
    assert share_quota([3, 3], 5) == [3, 2]


def test_loss_passes_run_in_train_mode_for_a_model_loaded_as_users_load_it(tmp_path):
    # from_pretrained returns eval mode; without train mode gradient checkpointing and LoRA
    # dropout silently do nothing.
    from learner.model import load_model

    model = load_model(str(h.save_tiny(tmp_path / "tiny")))
    assert not model.training
    cfg = h.config(tmp_path, steps=1, eval=False, gradient_checkpointing=True)
    t = GRPOTrainer(cfg, model=model, tokenizer=h.tokenizer(), env=h.ShortEnv())
    modes = []
    t.policy.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    checkpointed = []
    layer = t.policy.model.layers[0]
    layer.register_forward_pre_hook(
        lambda module, args: checkpointed.append(module.gradient_checkpointing and module.training))
    _, _, batch = h.step_batch(t)
    generation_calls = len(modes)
    assert generation_calls > 0 and not any(modes)  # sampling stays in eval mode
    t.update(batch)
    assert all(modes[generation_calls:]) and modes[generation_calls:]
    assert any(checkpointed)  # activations are recomputed in the backward pass


def test_reference_matches_the_policy_under_bf16_autocast(tmp_path):
    # Generation and the loss passes run under autocast (bf16 on a GPU); the reference must be
    # computed the same way, or the KL at step 0 is the precision gap instead of 0.
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # the precision is process-wide
    try:
        for lora in (0, 4):
            cfg = h.config(tmp_path / f"lora{lora}", steps=1, eval=False, lora_r=lora, beta=0.1)
            accelerator = Accelerator(cpu=True, mixed_precision="bf16")
            t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv(),
                            accelerator=accelerator)
            t.update.policy_is_reference = False  # as after the first update: the reference pass runs
            _, _, batch = h.step_batch(t)
            if not lora:  # the precondition: the copy's matmul weights are bf16, the policy's
                # fp32 (sharding.matmul_weights_in), and run without autocast it cannot run
                ref = t.update.ref_model
                assert ref.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
                with torch.no_grad(), pytest.raises(RuntimeError, match="dtype"):
                    t.update.logprobs(ref, batch)
            stats = t.update(batch)
            assert stats.kl == 0.0, (lora, stats)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_a_run_shorter_than_samples_every_still_writes_its_last_steps_groups(tmp_path):
    t = trainer(tmp_path, steps=2, eval=False, samples_every=10, samples_groups=1)
    t.train()
    samples = [json.loads(line) for line in
               (tmp_path / "run/samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [2]
