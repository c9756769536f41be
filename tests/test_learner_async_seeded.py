"""A seeded --async-steps 1 run repeats itself with LoRA dropout on: the background draw
samples with its own generators, the update's dropout with torch's global one."""

from __future__ import annotations

import torch

from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h


def _run(tmp_path):
    cfg = h.config(tmp_path, eval=False, steps=3, async_steps=1, lora_r=4, lora_dropout=0.5,
                   seed=3)
    t = GRPOTrainer(cfg, model=h.model(0), tokenizer=h.tokenizer(), env=h.ShortEnv())
    texts = [t.train_step().samples.rollout.texts for _ in range(cfg.steps)]
    weights = [p.detach().clone() for p in t.policy.parameters() if p.requires_grad]
    t.close()
    return texts, weights


def test_a_seeded_async_run_with_lora_dropout_repeats_itself(tmp_path):
    first, again = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert first[0] == again[0]  # every step's completions
    assert all(torch.equal(a, b) for a, b in zip(first[1], again[1], strict=True))
