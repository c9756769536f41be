"""A tiny random-init model learns the synthetic task (``synthetic``) through the learner's own
trainer on the device: the mean reward of a step reaches ``goal`` within ``steps`` steps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

GOAL, STEPS = 0.9, 60


def trainer_config(folder: Path, device: torch.device, *, steps: int, lr: float = 1e-2,
                   seed: int = 0) -> Any:
    """P=8, G=8, 8 tokens, no KL: the bandit-sized run that learns in a few dozen steps."""
    from learner.config import Config, field_types

    extra = {}
    if "device" in field_types():
        extra["device"] = str(device)
    elif device.type != "cuda" and device.type != "cpu":
        raise RuntimeError(f"the learner has no device setting yet: a run cannot be placed on "
                           f"{device}")
    config = Config(model=str(folder), output_dir=str(folder / "run"), steps=steps,
                    prompts_per_step=8, group_size=8, max_new_tokens=8, learning_rate=lr,
                    beta=0.0, seed=seed, eval=False, progress=False, samples_every=0,
                    save_every_minutes=0, env_recipe="off", **extra)
    config.validate()
    return config


def learn(folder: Path, device: torch.device, *, steps: int = STEPS,
          goal: float = GOAL) -> dict[str, Any]:
    """Train until a step's mean reward reaches ``goal`` (or ``steps`` run out)."""
    from learner.model import load_model, load_tokenizer
    from learner.training.trainer import GRPOTrainer
    from scripts.gpucheck import synthetic

    if not (folder / "config.json").is_file():
        synthetic.save_model(folder)
    config = trainer_config(folder, device, steps=steps)
    model = load_model(str(folder))  # as users load one: from_pretrained
    trainer = GRPOTrainer(config, model=model, tokenizer=load_tokenizer(str(folder)),
                          env=synthetic.SayWordEnv())
    rewards: list[float] = []
    start = time.perf_counter()
    try:
        placed = str(next(trainer.policy.parameters()).device)
        for _ in range(steps):
            rewards.append(round(float(trainer.train_step().metrics["reward/mean"]), 3))
            if rewards[-1] >= goal:
                break
    finally:
        trainer.close()
    return {"device": placed, "goal": goal, "max_steps": steps, "steps": len(rewards),
            "rewards": rewards, "learned": bool(rewards) and rewards[-1] >= goal,
            "seconds": round(time.perf_counter() - start, 1)}
