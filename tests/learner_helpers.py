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
            return {"short": 0.0, "digit": 0.0}, Verdict.fail(
                "sandbox_error", sandbox_error=True, error="cannot reach a Docker engine")
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
    """Entry point for ``accelerate launch -m tests.learner_helpers replicas OUT``: two steps
    (with a saved checkpoint and the trained model), then each process writes a checksum of its
    full policy weights (gathered, where DeepSpeed shards them) and its learning rate."""
    import hashlib

    import torch

    from learner.training import sharding
    from learner.training.trainer import GRPOTrainer

    cfg = config(Path(out), steps=2, prompts_per_step=4, group_size=4, eval=True, eval_size=3,
                 samples_every=0, lr_scheduler="cosine", warmup_steps=4, save_every=1,
                 gradient_accumulation_steps=2)
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=ShortEnv())

    def digest() -> str:
        h = hashlib.sha256()
        with sharding.full_weights(t.accelerator, t.model) as policy:
            for p in policy.parameters():
                h.update(p.detach().to(torch.float32).numpy().tobytes())
        return h.hexdigest()

    initial = digest()
    result = t.train()
    t.save_model(Path(out) / "final")
    rank = t.accelerator.process_index
    (Path(out) / f"replica-{rank}.txt").write_text(
        f"{initial} {digest()} {t.accelerator.num_processes} {t.stream.position} "
        f"{t.scheduler.get_last_lr()[0]:.3e} {result['after']['eval/n']:.0f}\n")


def _gradient_check(out: str) -> None:
    """Entry point for ``accelerate launch -m tests.learner_helpers grads OUT``: for each loss
    type, the gradient averaged over the processes must equal the single-process gradient of the
    concatenated batch (rank 0 writes the largest difference)."""
    import json
    import os

    import torch
    from accelerate.utils import gather_object

    from learner.training import grpo
    from learner.training.batching import Batch, pad_cat
    from learner.training.forward import completion_logits
    from learner.training.trainer import GRPOTrainer

    report = {}
    # The last case: process 1 draws only flat groups; with beta == 0 none of its rows has a
    # loss, so it joins with a row that carries none, while its tokens still count in DAPO's
    # normaliser.
    cases = [("grpo", False), ("dr_grpo", False), ("dapo", False), ("dapo", True)]
    for loss_type, flat in cases:
        name = loss_type + ("/one_process_flat" if flat else "")
        cfg = config(Path(out) / name, steps=1, prompts_per_step=4, group_size=4,
                     eval=False, samples_every=0, loss_type=loss_type, max_grad_norm=0.0,
                     max_new_tokens=12, beta=0.0 if flat else 0.04)
        env = ConstantEnv() if flat and os.environ.get("RANK") == "1" else ShortEnv()
        t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=env)
        batch, _ = t.make_batch(t.collect())
        rank = t.accelerator.process_index
        if rank == 1 and not flat:  # uneven shares, as early EOS and dropped samples make them
            batch = Batch(*(x[:-3] for x in batch._tensors()))
            batch.loss_mask[:, 7:] = 0
            batch.n_sequences = float((batch.loss_mask.sum(-1) > 0).sum())
            batch.n_tokens = float(batch.loss_mask.sum())
        t.optimizer.step = lambda: None  # keep the weights; compare the gradients
        t.optimizer.zero_grad = lambda set_to_none=True: None
        t.train_on(batch)
        got = torch.cat([p.grad.flatten() for p in t.policy.parameters()])
        parts = gather_object([(rank, batch)])
        if rank != 0:
            continue
        parts = [b for _, b in sorted(parts, key=lambda x: x[0])]
        whole = {name: pad_cat([getattr(b, name) for b in parts], 0, left=name.startswith("prompt"))
                 for name in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask",
                              "loss_mask")}
        adv = torch.cat([b.advantages for b in parts])
        reference = model()  # the plain definition: one forward over prompt + completion
        logits = completion_logits(reference, whole["prompt_ids"], whole["prompt_mask"],
                                   whole["completion_ids"], whole["completion_mask"])
        logp = grpo.token_logprobs(logits, whole["completion_ids"])
        mask = whole["loss_mask"]
        # The normalisers count every row of the step on every process (Dr. GRPO's is P * G).
        sequences = (cfg.prompts_per_step * cfg.group_size if loss_type == "dr_grpo"
                     else sum(b.n_sequences for b in parts))
        loss, _ = grpo.grpo_loss(
            logp, logp.detach(), logp.detach(), adv, mask, beta=cfg.beta, eps_low=0.2,
            eps_high=0.2, loss_type=loss_type, total_sequences=sequences,
            total_tokens=sum(b.n_tokens for b in parts), max_tokens=cfg.max_new_tokens)
        loss.backward()
        want = torch.cat([p.grad.flatten() for p in reference.parameters()])
        report[name] = {"max_diff": float((got - want).abs().max()),
                             "scale": float(want.abs().max()),
                             "rows": [len(b) for b in parts],
                             "tokens": [int(b.loss_mask.sum()) for b in parts],
                             "counted_tokens": [b.n_tokens for b in parts]}
    # --scale-rewards batch divides by the std of every process's rewards, not its own.
    cfg = config(Path(out) / "batch_std", steps=1, prompts_per_step=4, group_size=4, eval=False,
                 samples_every=0, scale_rewards="batch")
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=ShortEnv())
    rewards = t.collect()["rewards"]
    got = t.procs.std(rewards.tolist())
    every = [r for part in gather_object([rewards.tolist()]) for r in part]
    if t.accelerator.process_index == 0:
        report["batch_std"] = {"got": got, "local": float(rewards.double().std()),
                               "want": float(torch.tensor(every, dtype=torch.float64).std())}
    if report:
        (Path(out) / "gradients.json").write_text(json.dumps(report))


SHORT_ENV_ID = "test/Short-v0"


def _cli(argv: list[str]) -> int:
    """``python -m tests.learner_helpers cli ARGS``: ``python -m learner.run ARGS`` with
    ShortEnv registered as test/Short-v0 (a reward the tiny model can move)."""
    import gymnasium as gym

    from learner import run

    gym.register(SHORT_ENV_ID, entry_point=ShortEnv)
    return run.main(argv)


def _end_processes() -> None:
    """Tear the process group down together (as ``GRPOTrainer.close`` does for a run): a rank
    that exits while the other still holds it can abort in the C++ teardown."""
    from accelerate import PartialState

    state = PartialState()
    state.wait_for_everyone()
    state.destroy_process_group()


if __name__ == "__main__":
    import sys

    if sys.argv[1] == "cli":
        sys.exit(_cli(sys.argv[2:]))
    {"replicas": _replica_check, "grads": _gradient_check}[sys.argv[1]](sys.argv[2])
    _end_processes()
