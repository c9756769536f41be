"""Shared fixtures for the learner tests: a tiny random model and envs with controllable rewards."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.verify.verdict import Verdict
from learner.config import Config
from learner.model import load_tokenizer, tiny_model
from tasks import Task


@functools.lru_cache(maxsize=1)
def tokenizer():
    return load_tokenizer()


def model(seed: int = 0, layers: int = 2, hidden: int = 64):
    return tiny_model(layers=layers, hidden=hidden, seed=seed)


def save_tiny(path: Path, seed: int = 0) -> Path:
    """A tiny model + the real tokenizer on disk, loadable with --model PATH."""
    model(seed).save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


class ShortEnv(TaskEnv):
    """Over the arith pack; rewards short completions (dense, so every group has signal).

    ``fail_every``: every n-th graded completion reports a sandbox error instead.
    """

    env_id: ClassVar[str] = ""
    default_pack: ClassVar[str] = "arith"
    default_weights: ClassVar[dict[str, float]] = {"short": 1.0, "digit": 0.5}

    def __init__(self, *args: Any, fail_marker: str | None = None, **kwargs: Any):
        kwargs.setdefault("level", 1)
        super().__init__(*args, **kwargs)
        self.fail_marker = fail_marker

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        if self.fail_marker is not None and self.fail_marker in completion:
            return {"short": 0.0, "digit": 0.0}, Verdict.fail("sandbox_error", sandbox_error=True)
        short = max(0.0, 1.0 - len(completion) / 200)
        digit = float(any(ch.isdigit() for ch in completion))
        verdict = Verdict.ok() if str(task["answer"]) in completion else Verdict.fail("not_equal")
        return {"short": short, "digit": digit}, verdict


class ConstantEnv(ShortEnv):
    """Every completion gets the same reward: every group has zero variance."""

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        return {"short": 1.0, "digit": 0.0}, Verdict.fail("not_equal")


def config(tmp_path: Path, **overrides: Any) -> Config:
    base = dict(output_dir=str(tmp_path / "run"), steps=2, prompts_per_step=2, group_size=4,
                max_new_tokens=8, learning_rate=1e-3, eval_size=4, eval_batch_size=4,
                progress=False, samples_every=1, num_threads=1)
    base.update(overrides)
    cfg = Config(**base)
    cfg.validate()
    return cfg


def _replica_check(out: str) -> None:
    """Entry point for ``accelerate launch -m tests.learner_helpers OUT``: one step, then
    each process writes a checksum of its policy weights."""
    import hashlib

    import torch

    from learner.trainer import GRPOTrainer

    cfg = config(Path(out), steps=1, prompts_per_step=4, group_size=4, eval=False,
                 samples_every=0)
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=ShortEnv())

    def digest() -> str:
        h = hashlib.sha256()
        for p in t.policy.parameters():
            h.update(p.detach().to(torch.float32).numpy().tobytes())
        return h.hexdigest()

    initial = digest()
    t.train()
    rank = t.accelerator.process_index
    (Path(out) / f"replica-{rank}.txt").write_text(
        f"{initial} {digest()} {t.accelerator.num_processes} {t.stream.position}\n")


if __name__ == "__main__":
    import sys

    _replica_check(sys.argv[1])
