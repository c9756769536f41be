"""Shared fixtures for the learner tests: a tiny random model and envs with controllable rewards."""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.verify.verdict import Verdict
from learner.config import Config
from learner.model import load_model, load_tokenizer, tiny_model
from tasks import Task

ROOT = Path(__file__).resolve().parent.parent


def run_script_printing_ok(code: str, timeout: float = 300) -> None:
    """Run ``code`` in a fresh Python at the repo root and assert it ended by printing ``ok``
    (a subprocess keeps a backend it starts, such as torch's lazy device, out of the tests'
    own process)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


@contextlib.contextmanager
def forward_shapes(model, prefill_only: bool = False) -> Iterator[list[tuple[int, int]]]:
    """The (rows, positions) of each forward ``model`` makes inside the block; with
    ``prefill_only`` only those of more than one position (prefills, not decoding steps)."""
    shapes: list[tuple[int, int]] = []

    def record(mod, args, kwargs) -> None:
        rows, positions = kwargs["input_ids"].shape
        if positions > 1 or not prefill_only:
            shapes.append((rows, positions))

    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield shapes
    finally:
        hook.remove()


@functools.lru_cache(maxsize=1)
def tokenizer():
    return load_tokenizer()


@functools.cache
def _saved_tiny(seed: int, layers: int, hidden: int) -> Path:
    path = Path(tempfile.mkdtemp(prefix="grpo-gym-tiny-"))
    atexit.register(shutil.rmtree, path, True)
    tiny_model(layers=layers, hidden=hidden, seed=seed).save_pretrained(path)
    return path


def model(seed: int = 0, layers: int = 2, hidden: int = 64):
    """A tiny random model loaded the way users load one: ``from_pretrained`` from a folder
    (eval mode, tied weights), as ``--model PATH`` does. Every call is a fresh copy."""
    return load_model(str(_saved_tiny(seed, layers, hidden)))


def step_batch(trainer):
    """One step's samples, their advantages and the batch the trainer would train on."""
    samples = trainer.collect()
    advantages = trainer.advantages(samples)
    return samples, advantages, trainer.batch(samples, advantages)


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


class InfraEnv(ShortEnv):
    """Grading decided by the test, whatever the model writes: the tasks in ``fail_tasks`` and
    the ``fail_calls``-th grading calls (0-based, over the env's life) come back as
    infrastructure failures (a lost container); otherwise a task in ``pass_tasks`` passes, and
    without ``pass_tasks`` every even-numbered call does. Rewards are ShortEnv's, so groups
    keep a learning signal."""

    REASON = "container lost"

    def __init__(self, *args: Any, fail_tasks: tuple[str, ...] = (),
                 fail_calls: tuple[int, ...] = (), pass_tasks: tuple[str, ...] | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fail_tasks, self.fail_calls = set(fail_tasks), set(fail_calls)
        self.pass_tasks = None if pass_tasks is None else set(pass_tasks)
        self._calls = itertools.count()  # next() is atomic: graders run on a thread pool

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        call = next(self._calls)
        rewards, _ = super().grade(task, completion)
        if task.id in self.fail_tasks or call in self.fail_calls:
            return {"short": 0.0, "digit": 0.0}, Verdict.fail(
                "sandbox_error", sandbox_error=True, error=self.REASON)
        passed = task.id in self.pass_tasks if self.pass_tasks is not None else call % 2 == 0
        return rewards, Verdict.ok() if passed else Verdict.fail("not_equal")


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

    # eval_batch_size 1: process 0 evaluates 2 tasks in 2 calls, process 1 one in 1 (ZeRO-3
    # generation must not need the processes to make the same number of forwards).
    cfg = config(Path(out), steps=2, prompts_per_step=4, group_size=4, eval=True, eval_size=3,
                 eval_batch_size=1,
                 samples_every=0, lr_scheduler="cosine", warmup_steps=4, save_every=1,
                 gradient_accumulation_steps=2, dist_timeout=321)
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=ShortEnv())

    def digest() -> str:
        h = hashlib.sha256()
        with sharding.full_weights(t.accelerator, t.update.model) as policy:
            for p in policy.parameters():
                h.update(p.detach().to(torch.float32).numpy().tobytes())
        return h.hexdigest()

    initial = digest()
    result = t.train()
    t.save_model(Path(out) / "final")
    rank = t.accelerator.process_index
    _sync_check(t, Path(out) / f"sync-{rank}.json")
    (Path(out) / f"replica-{rank}.txt").write_text(
        f"{initial} {digest()} {t.accelerator.num_processes} {t.stream.position} "
        f"{t.update.scheduler.get_last_lr()[0]:.3e} {result['after']['eval/n']:.0f}\n")


class Partitioned:
    """Stands in for ZeRO-3: every parameter holds nothing (``ds_numel`` says its whole size)
    until ``gather`` makes a list of them whole; counts the bytes whole at once."""

    def __init__(self, model: Any):
        import torch

        self.full = {id(p): p.data for p in model.parameters()}
        for p in model.parameters():
            p.ds_numel = p.numel()
            p.data = torch.empty(0, dtype=p.dtype)
        self.live = self.peak = self.gathers = 0

    def __call__(self, params):
        import contextlib

        import torch

        @contextlib.contextmanager
        def gathered():
            assert len({id(p) for p in params}) == len(params)  # a tied weight once
            for p in params:
                p.data = self.full[id(p)]
            self.live += sum(p.numel() * p.element_size() for p in params)
            self.peak, self.gathers = max(self.peak, self.live), self.gathers + 1
            try:
                yield
            finally:
                self.live -= sum(p.numel() * p.element_size() for p in params)
                for p in params:
                    p.data = torch.empty(0, dtype=p.dtype)
        return gathered()

    def restore(self, model: Any) -> None:
        """Every parameter whole again (to score with the model)."""
        for p in model.parameters():
            p.data = self.full[id(p)]


SYNC_BUCKET = 2**20  # 1 MiB: the tiny model's embedding alone, the rest in a few buckets


def _sync_check(t, path: Path) -> None:
    """What a vLLM weight sync would stream (``checkpoint_weights`` as ``sync_engine`` calls
    it) against the full weights, with the bytes ZeRO-3 held whole at once counted; and the
    process group's timeout (--dist-timeout)."""
    import contextlib

    import torch

    from learner.sampling.vllm_engine import checkpoint_weights
    from learner.training import sharding

    gather = sharding.bucket_gather(t.accelerator)
    count = {"live": 0, "peak": 0, "gathers": 0}

    @contextlib.contextmanager
    def counted(params):
        size = sum(int(getattr(p, "ds_numel", p.numel())) * p.element_size() for p in params)
        with gather(params):
            count["live"] += size
            count["peak"] = max(count["peak"], count["live"])
            count["gathers"] += 1
            yield
        count["live"] -= size

    streamed = {name: value.float() for name, value in checkpoint_weights(
        t.policy, gather=counted if gather else None, bucket_bytes=SYNC_BUCKET)}
    with sharding.full_weights(t.accelerator, t.update.model) as policy:
        whole = {n: p.detach().float() for n, p in policy.named_parameters(
            remove_duplicate=False)}
        equal = list(streamed) == list(whole) and all(
            torch.equal(streamed[n], whole[n]) for n in whole)
    group = torch.distributed.group.WORLD._get_backend(torch.device("cpu"))
    path.write_text(json.dumps({"zero3": gather is not None, "equal": equal, **count,
                                "bucket": SYNC_BUCKET,
                                "timeout_s": group.options._timeout.total_seconds()}))


def _infra_check(out: str) -> None:
    """Entry point for ``accelerate launch -m tests.learner_helpers infra OUT``: process 1's
    first 4 grading calls are lost containers, process 0's none. Both must count the step's
    failures over every process and stop together; each writes the line it stopped with."""
    import os

    from learner.training.stops import InfraErrors
    from learner.training.trainer import GRPOTrainer

    cfg = config(Path(out), steps=3, prompts_per_step=4, group_size=4, eval=False)
    fail = (0, 1, 2, 3) if os.environ.get("RANK") == "1" else ()
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=InfraEnv(fail_calls=fail))
    try:
        t.train()
        said = "no stop"
    except InfraErrors as stop:
        said = str(stop)
    (Path(out) / f"stop-{t.accelerator.process_index}.txt").write_text(said)


def _moved(policy, seed: int = 7) -> None:
    """Move a policy away from its reference, the same way on every process: its KL to the
    reference then has a gradient."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.02)


def _plain_logprobs(m, prompt_ids, prompt_mask, completion_ids, completion_mask):
    """log pi(token) from one plain forward over prompt + completion (temperature 1)."""
    from learner.training.forward import completion_logits

    logits = completion_logits(m, prompt_ids, prompt_mask, completion_ids, completion_mask)
    return logits.float().log_softmax(-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)


def _paper_loss(per_token, mask, loss_type: str, dr_grpo_constant: int):
    """Each loss type's normalisation, as its paper writes it, over the whole step's tokens."""
    lengths = mask.sum(-1)
    if loss_type == "grpo":  # a mean per completion, then over the completions with tokens
        return ((per_token * mask).sum(-1) / lengths.clamp(min=1)).sum() / (lengths > 0).sum()
    if loss_type == "dapo":  # a mean over every token of the step
        return (per_token * mask).sum() / mask.sum()
    return (per_token * mask).sum() / dr_grpo_constant  # Dr. GRPO: over P * G * T


def _gradient_check(out: str) -> None:
    """Entry point for ``accelerate launch -m tests.learner_helpers grads OUT``: for each loss
    type, the gradient averaged over the processes must equal the gradient of the paper's loss
    over the whole step (every process's graded samples), computed here from its definition
    with one plain forward pass (rank 0 writes the largest difference)."""
    import dataclasses
    import json
    import math
    import os

    import torch
    from accelerate.utils import gather_object

    from learner.sampling.rollout import pad_cat
    from learner.training.trainer import GRPOTrainer

    report = {}
    # "one_process_flat": process 1 draws only flat groups; with beta == 0 none of its rows has
    # a loss, so it joins with a row that carries none, while its tokens still count in DAPO's
    # normaliser. "is_token": --is-correction token, with engine log-probs IS_OFFSETS[rank]
    # below the trainer's, so that every token's weight is min(e^offset, IS_CAP): the cap cuts
    # process 1's weights only, and its share of the tokens differs from process 0's.
    cases = [("grpo", False, False), ("dr_grpo", False, False), ("dapo", False, False),
             ("dapo", True, False), ("grpo", False, True)]
    for loss_type, flat, corrected in cases:
        name = loss_type + ("/one_process_flat" if flat else "") + ("/is_token" if corrected
                                                                       else "")
        cfg = config(Path(out) / name, steps=1, prompts_per_step=4, group_size=4,
                     eval=False, samples_every=0, loss_type=loss_type, max_grad_norm=0.0,
                     max_new_tokens=12, beta=0.0 if flat else 0.04,
                     is_correction="token" if corrected else "none", is_cap=IS_CAP,
                     gradient_accumulation_steps=2, cpu_matmul="torch")  # the definition's kernel
        env = ConstantEnv() if flat and os.environ.get("RANK") == "1" else ShortEnv()
        t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=env)
        _moved(t.policy)  # as after an update: the KL term has a gradient
        t.update.policy_is_reference = False
        samples = t.collect()
        rank = t.accelerator.process_index
        if rank == 1 and not flat:  # uneven shares, as early EOS and dropped samples make them
            roll, scores = samples.rollout, samples.scores
            mask = roll.completion_mask.clone()
            mask[:, 7:] = 0
            roll = dataclasses.replace(roll, completion_mask=mask,
                                       completion_ids=roll.completion_ids.masked_fill(
                                           mask == 0, tokenizer().pad_token_id))
            failed = [i >= len(scores.rewards) - 3 for i in range(len(scores.rewards))]
            samples = dataclasses.replace(samples, rollout=roll,
                                          scores=dataclasses.replace(scores, infra_error=failed))
        advantages = t.advantages(samples)
        batch = t.batch(samples, advantages)
        if corrected:  # an engine whose log-probs are IS_OFFSETS[rank] below the trainer's
            batch = dataclasses.replace(
                batch, sampling_logprobs=batch.sampling_logprobs - IS_OFFSETS[rank])
        t.update.optimizer.step = lambda: None  # keep the weights; compare the gradients
        t.update.optimizer.zero_grad = lambda set_to_none=True: None
        stats = t.update(batch)
        got = torch.cat([p.grad.flatten() for p in t.policy.parameters()])
        roll = samples.rollout
        mine = {"prompt_ids": roll.prompt_ids, "prompt_mask": roll.prompt_mask,
                "completion_ids": roll.completion_ids, "completion_mask": roll.completion_mask,
                "graded": samples.graded, "advantages": advantages,
                "rows": len(batch), "tokens": int(batch.loss_mask.sum()),
                "counted_tokens": batch.n_tokens, "row_tokens": batch.loss_mask.sum(-1).tolist(),
                "logged": {**stats.mismatch, **stats.is_correction}}
        parts = [p for _, p in sorted(gather_object([(rank, mine)]), key=lambda x: x[0])]
        if rank != 0:
            continue
        whole = {k: pad_cat([p[k] for p in parts], 0, left=k.startswith("prompt"))
                 for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")}
        adv = torch.cat([p["advantages"] for p in parts]).unsqueeze(-1)
        # The paper's batch: every graded sample of the step, flat groups included.
        mask = whole["completion_mask"] * torch.cat([p["graded"] for p in parts]).unsqueeze(-1)
        mask = mask.float()
        policy, reference = model(), model()
        _moved(policy)
        args = (whole["prompt_ids"], whole["prompt_mask"], whole["completion_ids"],
                whole["completion_mask"])
        logp = _plain_logprobs(policy, *args)
        with torch.no_grad():
            ref = _plain_logprobs(reference, *args)
        surrogate = torch.exp(logp - logp.detach()) * adv  # the ratio is 1, its gradient not
        if corrected:  # the truncated IS weight of each process's rows
            surrogate = surrogate * torch.cat([
                torch.full((len(p["advantages"]), 1), min(math.exp(IS_OFFSETS[r]), IS_CAP))
                for r, p in enumerate(parts)])
        d = ref - logp
        kl = torch.exp(d) - d - 1
        dr_grpo_constant = cfg.prompts_per_step * cfg.group_size * cfg.max_new_tokens
        _paper_loss(-surrogate + cfg.beta * kl, mask, loss_type, dr_grpo_constant).backward(
            retain_graph=True)
        want = torch.cat([p.grad.flatten() for p in policy.parameters()])
        policy.zero_grad()
        _paper_loss(cfg.beta * kl, mask, loss_type, dr_grpo_constant).backward(
            inputs=list(policy.parameters()))
        kl_grad = torch.cat([p.grad.flatten() for p in policy.parameters()])
        report[name] = {"max_diff": float((got - want).abs().max()),
                        "scale": float(want.abs().max()),
                        "kl_scale": float(kl_grad.abs().max()),
                        "rows": [p["rows"] for p in parts],
                        "tokens": [p["tokens"] for p in parts],
                        "counted_tokens": [p["counted_tokens"] for p in parts],
                        "row_tokens": [p["row_tokens"] for p in parts],
                        "logged": [p["logged"] for p in parts]}
    # --scale-rewards batch divides by the std of every process's rewards, not its own.
    cfg = config(Path(out) / "batch_std", steps=1, prompts_per_step=4, group_size=4, eval=False,
                 samples_every=0, scale_rewards="batch")
    t = GRPOTrainer(cfg, model=model(), tokenizer=tokenizer(), env=ShortEnv())
    samples = t.collect()
    rewards = samples.rewards[samples.graded]
    got = t.procs.std(rewards.tolist())
    every = [r for part in gather_object([rewards.tolist()]) for r in part]
    if t.accelerator.process_index == 0:
        report["batch_std"] = {"got": got, "local": float(rewards.double().std()),
                               "want": float(torch.tensor(every, dtype=torch.float64).std())}
    if report:
        (Path(out) / "gradients.json").write_text(json.dumps(report))


SHORT_ENV_ID = "test/Short-v0"
IS_OFFSETS = (0.1, 0.4)  # per rank: how far the stand-in engine's log-probs are below
IS_CAP = 1.3  # between e^0.1 and e^0.4


def _cli(argv: list[str]) -> int:
    """``python -m tests.learner_helpers cli ARGS``: ``python -m learner.run ARGS`` with
    ShortEnv registered as test/Short-v0 (a reward the tiny model can move)."""
    import gymnasium as gym

    from learner import run

    gym.register(SHORT_ENV_ID, entry_point=ShortEnv)
    return run.main(argv)


def _cli_out_of_memory(argv: list[str]) -> int:
    """``python -m tests.learner_helpers cli-oom ARGS``: as ``cli``, with CUDA's
    out-of-memory error raised from process 1's second update (process 0 carries on into
    the step's collectives)."""
    import os

    import torch

    from learner.training.update import PolicyUpdate

    real, calls = PolicyUpdate.__call__, []

    def update(self, batch, staleness=0):
        calls.append(1)
        if os.environ.get("RANK") == "1" and len(calls) == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, batch, staleness)

    PolicyUpdate.__call__ = update
    return _cli(argv)


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
    if sys.argv[1] == "cli-oom":
        sys.exit(_cli_out_of_memory(sys.argv[2:]))
    {"replicas": _replica_check, "grads": _gradient_check,
     "infra": _infra_check}[sys.argv[1]](sys.argv[2])
    _end_processes()
