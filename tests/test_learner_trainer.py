"""End-to-end GRPO steps with the tiny model on test envs with controllable rewards."""

import json
import math
import warnings

import torch

from learner.training.metrics import read_metrics
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h

REQUIRED = ["step", "reward/mean", "reward/std", "reward/short", "reward/digit", "group/std_mean",
            "group/frac_zero_std", "kl", "loss", "clip_frac", "entropy", "completion/len_mean",
            "completion/truncated_frac", "lr", "grad_norm", "time/step_s", "time/generate_s",
            "time/score_s", "time/train_s", "tokens_per_s"]


def trainer(tmp_path, env=None, seed=0, **overrides):
    cfg = h.config(tmp_path, **overrides)
    return GRPOTrainer(cfg, model=h.model(seed), tokenizer=h.tokenizer(),
                       env=env or h.ShortEnv())


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
        logp, _ = t._logprobs(t.model, batch)
    return (logp * batch.loss_mask).sum(-1) / batch.loss_mask.sum(-1)


def test_an_update_favours_completions_with_positive_advantage(tmp_path):
    t = trainer(tmp_path, steps=1, prompts_per_step=2, group_size=6, learning_rate=1e-3,
                beta=0.0, eval=False)
    batch, _ = t.make_batch(t.collect())
    before = _sequence_logprobs(t, batch)
    stats = t.train_on(batch)
    assert stats["kl"] is None  # beta == 0: no reference, so no KL is reported as measured
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
    assert t.scheduler.scheduler.last_epoch == 1
    assert not [w for w in caught if "lr_scheduler" in str(w.message)], caught
    row = read_metrics(tmp_path / "run")[-1]
    assert row["group/frac_zero_std"] == 1.0 and row["group/trained"] == 0
    assert row["skipped"] is True and row["kl"] is None and row["loss"] is None
    assert all(torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))


def test_flat_groups_keep_their_kl_term(tmp_path):
    # With beta > 0 the loss of a flat group is beta * KL: once the policy has moved away from
    # the reference, the groups are trained, not dropped.
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=1, eval=False, beta=0.1)
    t.policy_is_reference = False  # as after the first update
    batch, adv = t.make_batch(t.collect())
    assert batch is not None and len(batch) == 8 and not adv.any()
    assert batch.n_sequences == 8 and batch.n_tokens == float(batch.loss_mask.sum())


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
    assert t.policy_is_reference


def test_the_reference_pass_runs_once_the_policy_has_moved(tmp_path, monkeypatch):
    t = trainer(tmp_path, steps=2, eval=False, beta=0.1, learning_rate=1e-3)
    calls = []
    real = t._ref_logprobs
    monkeypatch.setattr(t, "_ref_logprobs", lambda mb: calls.append(1) or real(mb))
    first = t.train_step()
    assert calls == [] and first["kl"] == 0.0  # step 0: the reference is the policy itself
    assert not t.policy_is_reference
    second = t.train_step()
    assert calls and second["kl"] > 0


def test_dynamic_sampling_draws_more_prompts_when_groups_are_flat(tmp_path):
    t = trainer(tmp_path, env=h.ConstantEnv(), steps=1, eval=False, dynamic_sampling=True,
                max_sampling_tries=3)
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    assert row["group/sampling_tries"] == 3
    assert t.stream.position == 2 * 3  # P fresh prompts on each try


def test_sandbox_errors_are_dropped_not_scored_zero(tmp_path):
    t = trainer(tmp_path, steps=1, eval=False)
    col = t.collect()
    col["infra"][1] = True  # pretend the grader's sandbox failed on one sample
    col["rewards"][1] = 0.0
    batch, adv = t.make_batch(col)
    assert adv[1] == 0.0
    assert len(batch) == 2 * 4 - 1
    rewards = col["rewards"][[0, 2, 3]]
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    assert torch.allclose(adv[[0, 2, 3]], expected, atol=1e-5)


def test_env_sandbox_error_verdicts_are_detected(tmp_path, capsys):
    env = h.ShortEnv(fail_marker="")  # every completion "hits" a sandbox failure
    t = trainer(tmp_path, env=env, steps=2, eval=False)
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    assert row["samples/sandbox_errors"] == 2 * 4
    assert row["group/trained"] == 0
    # The run says so once, with the sandbox's own reason, rather than only in a metric.
    notices = [line for line in capsys.readouterr().out.splitlines() if "not scored" in line]
    assert notices == ["warning: step 1: 8 of 8 samples were not scored because the sandbox "
                       "failed (cannot reach a Docker engine). They are dropped, not scored 0, "
                       "and counted in samples/sandbox_errors; while this lasts, the run learns "
                       "only from the rest."]


def test_nonfinite_loss_skips_the_update(tmp_path):
    t = trainer(tmp_path, steps=1, eval=False)
    col = t.collect()
    batch, _ = t.make_batch(col)
    batch.advantages[:] = float("nan")
    before = [p.detach().clone() for p in t.policy.parameters()]
    stats = t.train_on(batch)
    assert stats["nonfinite_skipped"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, t.policy.parameters(), strict=True))


def test_gradient_accumulation_matches_one_big_batch(tmp_path):
    grads = []
    for accum in (1, 3):
        t = trainer(tmp_path / str(accum), steps=1, eval=False, gradient_accumulation_steps=accum,
                    max_grad_norm=0.0, learning_rate=1e-9)
        torch.manual_seed(5)
        batch, _ = t.make_batch(t.collect())
        batch.advantages = torch.linspace(-1, 1, len(batch))
        t.optimizer.step = lambda: None  # keep the weights; inspect the gradients
        t.optimizer.zero_grad = lambda set_to_none=True: None
        t.train_on(batch)
        grads.append(torch.cat([p.grad.flatten() for p in t.policy.parameters()
                                if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-7)


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
    col = t.collect()
    assert bool(col["rollout"].truncated.all())
    batch, _ = t.make_batch(col)
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
    batch, _ = t.make_batch(t.collect())
    generation_calls = len(modes)
    assert generation_calls > 0 and not any(modes)  # sampling stays in eval mode
    t.train_on(batch)
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
            t.policy_is_reference = False  # as after the first update: the reference pass runs
            batch, _ = t.make_batch(t.collect())
            if not lora:  # the precondition: run plainly, the fp32 copy differs from the policy
                with torch.no_grad():
                    assert not torch.equal(t._logprobs(t.ref_model, batch)[0],
                                           t._logprobs(t.model, batch)[0])
            stats = t.train_on(batch)
            assert stats["kl"] == 0.0, (lora, stats)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_gspo_uses_one_ratio_per_sequence(tmp_path):
    t = trainer(tmp_path, steps=2, eval=False, importance_sampling_level="sequence",
                num_iterations=2)
    t.train()
    rows = read_metrics(tmp_path / "run")
    assert all(math.isfinite(r["loss"]) for r in rows)


def test_cpu_threads_follow_what_is_busy_now_not_the_lagging_load_average(monkeypatch):
    import os

    from learner.training import distributed

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    # A job that ended seconds ago still weighs on the 1-minute load average.
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    for percent, processes, threads in ((0.0, 1, 4), (0.0, 2, 2), (50.0, 1, 2), (100.0, 1, 1)):
        monkeypatch.setattr(distributed.psutil, "cpu_percent", lambda interval, p=percent: p)
        assert distributed.cpu_threads(processes) == threads


def test_a_run_shorter_than_samples_every_still_writes_its_last_steps_groups(tmp_path):
    t = trainer(tmp_path, steps=2, eval=False, samples_every=10, samples_groups=1)
    t.train()
    samples = [json.loads(line) for line in
               (tmp_path / "run/samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [2]
