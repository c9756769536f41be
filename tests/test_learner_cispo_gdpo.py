"""The two newest objectives against values and gradients computed by hand: CISPO (MiniMax-M1;
TRL's loss_type="cispo") and GDPO-style multi-reward normalisation (normalize_then_sum), their
refused combinations, ``--recipe cispo``, and normalize_then_sum wired into the trainer."""

from __future__ import annotations

import json
import math

import pytest
import torch

from learner.choices import LOSS_TYPES
from learner.config import Config, ConfigError, parse_config
from learner.distribution import token_logprobs
from learner.training import grpo
from tests import learner_helpers as h

NORM = {"total_sequences": 1, "total_tokens": 3, "max_tokens": 3}


def _loss(ratios, adv, loss_type, **kw):
    """The loss of one completion whose tokens have ``ratios`` to the old policy, and its
    gradient with respect to each token's log-prob."""
    logp = torch.log(torch.tensor([ratios], dtype=torch.float64)).requires_grad_()
    old = torch.zeros_like(logp)
    norm = {**NORM, "total_tokens": len(ratios)}
    loss, aux = grpo.grpo_loss(logp, old, None, torch.tensor([adv], dtype=torch.float64),
                               torch.ones_like(logp), beta=0.0, loss_type=loss_type,
                               **{"eps_low": 0.2, "eps_high": 0.2, **kw}, **norm)
    loss.backward()
    return float(loss.detach()), logp.grad[0].tolist(), aux


# -- CISPO --------------------------------------------------------------------------------------
def test_cispo_value_and_gradient_by_hand():
    # Ratios 1.5, 0.5, 6 on a positive advantage, cap 1 + 4 = 5: weights 1.5, 0.5, 5 (detached).
    # Loss = -(1.5 log 1.5 + 0.5 log 0.5 + 5 log 6) / 3 (dapo's token mean); d loss / d logp_t
    # = -w_t * A / 3 = -0.5, -1/6, -5/3. Without the stop-gradient it would be -(w + w logp)/3.
    value, grad, aux = _loss([1.5, 0.5, 6.0], 1.0, "cispo", eps_high=4.0)
    assert value == pytest.approx(-(1.5 * math.log(1.5) + 0.5 * math.log(0.5)
                                    + 5 * math.log(6)) / 3)
    assert grad == pytest.approx([-0.5, -1 / 6, -5 / 3])
    assert aux["clipped_high"].tolist() == [[False, False, True]]  # only 6 > 5 was capped
    assert not aux["clipped_low"].any()


def test_cispo_keeps_the_gradient_that_ppos_clip_silences():
    # PPO (clip 0.2) on the same tokens: ratio 1.5 > 1.2 on A > 0 is clipped, gradient 0;
    # ratio 0.5 is not (gradient -r A / 3 = -1/6); 6 is clipped, 0.
    _, ppo, _ = _loss([1.5, 0.5, 6.0], 1.0, "dapo", eps_high=0.2)
    assert ppo == pytest.approx([0.0, -1 / 6, 0.0])
    _, cispo, _ = _loss([1.5, 0.5, 6.0], 1.0, "cispo", eps_high=0.2)  # cap 1.2
    assert cispo == pytest.approx([-1.2 / 3, -0.5 / 3, -1.2 / 3])
    # A < 0: PPO's low side silences ratio 0.5 (< 0.8); CISPO has no lower bound: the gradient
    # is -w A / 2 = 0.25 there, and 0.75 on ratio 1.5 (which PPO keeps, at r A / 2 = 0.75).
    _, ppo, _ = _loss([0.5, 1.5], -1.0, "dapo")
    assert ppo == pytest.approx([0.0, 0.75])
    _, cispo, aux = _loss([0.5, 1.5], -1.0, "cispo", eps_high=4.0)
    assert cispo == pytest.approx([0.25, 0.75])
    assert not aux["clipped_high"].any()  # the cap counts on positive advantages (TRL's)


def test_cispo_on_policy_has_ppos_gradient():
    # At ratio 1 the weight is 1: the gradient is -A grad logp / N, PPO's (dapo) exactly.
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5, requires_grad=True)
    tokens = torch.randint(0, 5, (2, 3))
    adv, mask = torch.tensor([1.3, -0.7]), torch.tensor([[1, 1, 1], [1, 1, 0]])
    grads = []
    for loss_type in ("dapo", "cispo"):
        logits.grad = None
        logp = token_logprobs(logits, tokens)
        loss, _ = grpo.grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0, eps_low=0.2,
                                 eps_high=0.2, loss_type=loss_type, total_sequences=2,
                                 total_tokens=5, max_tokens=3)
        loss.backward()
        grads.append(logits.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-7)


def test_cispo_aggregates_as_dapo():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    norm = {"total_sequences": 2, "total_tokens": 4, "max_tokens": 5}
    assert float(grpo.aggregate(per_token, mask, "cispo", **norm)) == pytest.approx(10 / 4)


def test_cispo_flags_defaults_and_refusals():
    assert "cispo" in LOSS_TYPES
    assert Config(loss_type="cispo").eps_high == 4.0  # a cap of 5: ScaleRL's, TRL's advice
    assert Config(loss_type="cispo", epsilon_high=0.28).eps_high == 0.28
    assert Config(loss_type="grpo").eps_high == 0.2  # the others unchanged
    for bad, line in (
            ({"epsilon": 0.2}, "--epsilon has no effect with --loss-type cispo"),
            ({"importance_sampling_level": "sequence"},
             "--importance-sampling-level sequence (GSPO) needs a sequence-level aggregation")):
        with pytest.raises(ConfigError, match=line.replace("(", r"\(").replace(")", r"\)")):
            Config(loss_type="cispo", **bad).validate()


def test_the_cispo_recipe():
    cfg = parse_config(["--env-recipe", "off", "--recipe", "cispo"])
    assert (cfg.loss_type, cfg.eps_high, cfg.beta, cfg.importance_sampling_level,
            cfg.reward_scaling) == ("cispo", 4.0, 0.0, "token", "group")
    assert cfg.recipe_record["applied"]["epsilon_high"] == 4.0
    cfg.validate()
    # On top of the env's cpu recipe, and under explicit flags.
    cfg = parse_config(["--recipe", "cispo", "--epsilon-high", "1.0"])
    assert (cfg.loss_type, cfg.eps_high, cfg.beta) == ("cispo", 1.0, 0.0)
    assert cfg.recipe_record["overridden"] == ["epsilon_high"]


# -- GDPO: normalize_then_sum -----------------------------------------------------------------
def test_normalize_then_sum_by_hand():
    # Group 0 (3 samples): correct [1, 0, 0] (std 1/sqrt 3) and format [0, 0.5, 0] (std
    # 1/(2 sqrt 3)), weights 1 and 1. Normalised: correct sqrt3 [2/3, -1/3, -1/3], format
    # sqrt3 [-1/3, 2/3, -1/3]; sum sqrt3 [1/3, 1/3, -2/3]. Group 1 (2 samples): correct [0, 0]
    # (no spread: 0), format [0.5, 0] -> [1/sqrt2, -1/sqrt2]. Group 2: one sample, no baseline:
    # 0. The batch of sums: mean 0, squares 1/3 + 1/3 + 4/3 + 1/2 + 1/2 + 0 = 3, unbiased
    # variance 3/5: advantages = sum / sqrt(3/5).
    components = torch.tensor([[1.0, 0.0], [0.0, 0.5], [0.0, 0.0],
                               [0.0, 0.5], [0.0, 0.0], [1.0, 1.0]])
    groups = torch.tensor([0, 0, 0, 1, 1, 2])
    adv = grpo.normalize_then_sum(components, torch.tensor([1.0, 1.0]), groups, 3)
    s3, s2 = math.sqrt(3), math.sqrt(2)
    summed = [s3 / 3, s3 / 3, -2 * s3 / 3, 1 / s2, -1 / s2, 0.0]
    assert adv.tolist() == pytest.approx([v / math.sqrt(3 / 5) for v in summed], rel=1e-3)
    # The weighted sum first (GRPO): group 0's rewards 1, 0.5, 0 give 1, 0, -1: the format
    # term is half the correctness term. GDPO gives each component the same weight: the
    # format-only sample ties with the correct one.
    rewards = components.sum(-1)
    moments = grpo.group_moments(rewards, groups, 3)
    plain = grpo.group_advantages(rewards, groups, moments, "group")
    assert plain[:3].tolist() == pytest.approx([1.0, 0.0, -1.0], rel=1e-3)
    assert float(adv[0]) == pytest.approx(float(adv[1]), rel=1e-3)


def test_normalize_then_sum_weights_and_shapes():
    components = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    groups = torch.tensor([0, 0, 0, 0])
    # Weight 0 drops a component; weights scale the normalised ones (then the batch std
    # takes the overall scale away).
    only_first = grpo.normalize_then_sum(components, torch.tensor([1.0, 0.0]), groups, 1)
    first = grpo.group_advantages(components[:, 0], groups,
                                  grpo.group_moments(components[:, 0], groups, 1), "group")
    assert only_first.tolist() == pytest.approx((first / first.std()).tolist(), rel=1e-3)
    # The batch's moments from elsewhere (several processes) replace this batch's.
    s = grpo.group_normalized_sum(components, torch.tensor([1.0, 1.0]), groups, 1)
    given = grpo.normalize_then_sum(components, torch.tensor([1.0, 1.0]), groups, 1,
                                    batch_moments=(0.5, 2.0))
    assert given.tolist() == pytest.approx(((s - 0.5) / (2.0 + 1e-4)).tolist(), rel=1e-6)
    with pytest.raises(ValueError, match=r"components must be \(B, K\)"):
        grpo.normalize_then_sum(components, torch.tensor([1.0]), groups, 1)


def test_reward_norm_refusals():
    assert Config().reward_norm == "sum_then_normalize"
    Config(reward_norm="normalize_then_sum", loss_type="cispo").validate()
    for bad, line in (({"scale_rewards": "group"}, "drop --scale-rewards"),
                      ({"loss_type": "dr_grpo"}, "which Dr. GRPO removes")):
        with pytest.raises(ConfigError, match=line):
            Config(reward_norm="normalize_then_sum", **bad).validate()


def test_the_trainer_normalises_each_env_component(tmp_path):
    from learner.training.reward_components import REST, reward_components
    from learner.training.trainer import GRPOTrainer

    cfg = h.config(tmp_path, steps=1, eval_size=0, reward_norm="normalize_then_sum")
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())
    samples = t.collect()
    # ShortEnv's components: short (weight 1) and digit (0.5); their weighted sum is the
    # reward, so there is no rest.
    values, weights, names = reward_components(samples, t.env.reward_weights)
    assert names == ["short", "digit"] and weights.tolist() == [1.0, 0.5]
    rows = samples.scores.components
    assert values.tolist() == [[r["short"], r["digit"]] for r in rows]
    want = grpo.normalize_then_sum(values, weights, samples.groups, len(samples.tasks))
    assert torch.allclose(t.advantages(samples), want, atol=1e-6)
    assert t.advantages(samples).abs().sum() > 0
    # DAPO's overlong penalty is not an env component: it joins as the rest, weight 1.
    shaped = h.config(tmp_path / "shaped", steps=1, eval_size=0, overlong_cache=4,
                      reward_norm="normalize_then_sum")
    t = GRPOTrainer(shaped, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())
    samples = t.collect()
    values, weights, names = reward_components(samples, t.env.reward_weights)
    assert samples.shaping.abs().max() > 0  # the tiny model runs to the budget
    assert names[-1] == REST and weights[-1] == 1.0
    assert torch.allclose(values[:, -1], samples.shaping.double())


def test_cispo_and_normalize_then_sum_train_on_the_lazy_device(tmp_path, capsys):
    """``--recipe cispo --reward-norm normalize_then_sum`` through the command line, on the lazy
    device (a CPU tensor mixed in raises, as on CUDA), with the overlong penalty as the rest
    column."""
    from learner.training.run_log import read_metrics
    from tests.test_learner_device import _trained, cli

    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    done = cli(capsys, tiny, out, "--steps", "1", "--no-eval", "--recipe", "cispo", "--reward-norm",
               "normalize_then_sum", "--overlong-cache", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = read_metrics(out)
    _trained([row])
    assert row["reward/overlong"] < 0 and math.isfinite(row["loss"])
    record = json.loads((out / "config.json").read_text())
    assert (record["loss_type"], record["reward_norm"], record["beta"]) == \
        ("cispo", "normalize_then_sum", 0.0)
