"""--async-steps 1 keeps the engine's mismatch apart from the policy's drift; the update logs
both clip sides and the old->new approx KL of each iteration."""

from __future__ import annotations

import pytest

from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h


def _trainer(tmp_path, **overrides):
    cfg = h.config(tmp_path, eval=False, **overrides)
    return GRPOTrainer(cfg, model=h.model(0), tokenizer=h.tokenizer(), env=h.ShortEnv())


def test_stale_samples_log_the_mismatch_apart_from_the_drift(tmp_path):
    t = _trainer(tmp_path, steps=2, async_steps=1, learning_rate=1e-2)
    first, second = t.train_step().metrics, t.train_step().metrics
    t.close()
    assert first["rollout/staleness"] == 0 and second["rollout/staleness"] == 1
    # Fresh samples: the first pass against the engine is the mismatch itself.
    assert "rollout/stale_logprob_abs_diff_mean" not in first
    # Stale ones: the update's gap (mismatch + one step of drift) goes under stale_*, and the
    # draw scored its own samples with the policy that drew them: the mismatch alone, float
    # noise of the learner's own loop against its forward pass.
    pure, mixed = (second["rollout/logprob_abs_diff_mean"],
                   second["rollout/stale_logprob_abs_diff_mean"])
    assert pure < 1e-3 and mixed > 10 * pure


def test_clip_sides_and_approx_kl_per_iteration_are_logged(tmp_path):
    t = _trainer(tmp_path, steps=1, num_iterations=2, learning_rate=1e-2, epsilon=0.01,
                 epsilon_high=0.02)
    m = t.train_step().metrics
    t.close()
    # The first iteration scores the samples with the policy that drew them: exactly 0; the
    # second, after an optimizer step, has moved.
    assert m["approx_kl/iter_1"] == 0.0 and m["approx_kl/iter_2"] > 0
    assert m["approx_kl"] == m["approx_kl/iter_2"]
    # The last iteration's clipped share is its two sides together.
    assert m["clip_frac"] == pytest.approx(m["clip_frac/low"] + m["clip_frac/high"])
    assert m["clip_frac/low"] > 0 and m["clip_frac/high"] > 0
