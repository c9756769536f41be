"""The line a step logs to ``metrics.jsonl``: its samples' rewards and lengths, its groups, the
update's figures, the reward-hack monitor's counts and its timings (grading's per sample too),
global over processes."""

from __future__ import annotations

import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from learner.evaluation.infra import InfraCount
from learner.sampling.episodes import episode_metrics
from learner.training import hack_monitor
from learner.training.batching import Batch
from learner.training.distributed import Processes
from learner.training.hack_monitor import StepFlags, StepShaping
from learner.training.samples import StepSamples
from learner.training.update import UpdateStats


@dataclass
class StepTimes:
    step_s: float
    train_s: float


def step_metrics(samples: StepSamples, batch: Batch | None, update: UpdateStats,
                 flags: StepFlags, shaping: StepShaping, times: StepTimes, *, lr: float,
                 procs: Processes, infra_errors: int) -> dict[str, Any]:
    """Every figure of the step; per-process numbers are averaged over processes (flags and
    shaping counts, and the update's ``rollout/*`` mismatch and IS figures, are already
    global: averaging leaves them as they are)."""
    out = {**sample_metrics(samples), **update.metrics(),
           "group/trained": 0 if batch is None else int(batch.groups.unique().numel())}
    out = {k: procs.mean(v) if isinstance(v, float | int) and not isinstance(v, bool) else v
           for k, v in out.items()}
    out.update(samples.draw_mismatch)  # global already: the engine mismatch at draw time
    out.update(grading_metrics(samples.scores.infos, procs))
    out.update(infra_metrics(samples, procs, infra_errors))
    out.update(hack_monitor.step_metrics(flags))
    if shaping.graded:
        out["samples/shaping_only_frac"] = shaping.shaping_only / shaping.graded
    roll = samples.rollout
    generated = roll.generated_tokens * procs.world
    out.update({
        "lr": lr,  # after the step's schedule step (the next step's rate), as HF Trainer logs it
        "time/step_s": times.step_s,
        "time/generate_s": samples.generate_s,
        "time/score_s": samples.score_s,
        "time/train_s": times.train_s,
        "tokens_per_s": procs.mean(generated / times.step_s),
        "tokens_per_s/generate": procs.mean(generated / max(samples.generate_s, 1e-9)),
        "tokens_per_s/train": procs.mean(update.trained_tokens * procs.world
                                         / max(times.train_s, 1e-9)),
    })
    out.update(memory_metrics(procs))
    return out


def memory_metrics(procs: Processes) -> dict[str, float]:
    """The run's peak memory so far, the most over processes: resident (this process's high
    water mark, which the kernel keeps) and, on CUDA, the peak allocated on the GPU."""
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB on Linux
    out = {"memory/peak_rss_gb": max(procs.gather_objects(peak_rss))}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["memory/cuda_peak_allocated_gb"] = max(procs.gather_objects(
            torch.cuda.max_memory_allocated() / 1e9))
    return out


def grading_metrics(infos: Sequence[Mapping[str, Any]], procs: Processes) -> dict[str, Any]:
    """How long grading took per sample, over every process's samples: the p50, p99 and max
    of the env's ``grading_s`` (a mean would hide the one slow verdict that stalls a step),
    and ``samples/grade_timeouts``, how many samples hit a time limit while graded (the env's
    ``hit_time_limit``). A multi-turn episode's is its final grading; its tool calls are
    ``tool/s``."""
    seconds = [float(info["grading_s"]) for info in infos if "grading_s" in info]
    every = torch.tensor([s for part in procs.gather_objects(seconds) for s in part],
                         dtype=torch.float64)
    limited = sum(procs.gather_ints(sum(bool(info.get("hit_time_limit")) for info in infos)))
    out: dict[str, Any] = {"samples/grade_timeouts": limited}
    if every.numel():
        p50, p99 = torch.quantile(every, torch.tensor([0.5, 0.99], dtype=torch.float64)).tolist()
        out.update({"time/grade_p50_s": p50, "time/grade_p99_s": p99,
                    "time/grade_max_s": float(every.max())})
    return out


def infra_errors(samples: StepSamples, procs: Processes) -> int:
    """How many of the step's samples failed for infrastructure, over every process."""
    return sum(procs.gather_ints(sum(map(bool, samples.scores.infra_error))))


def infra_metrics(samples: StepSamples, procs: Processes, failed: int) -> dict[str, Any]:
    """Over every process's samples: ``samples/infra_errors`` (``failed``, from
    ``infra_errors``) and ``accuracy``, with those counted as misses (never a smaller
    denominator) and None past 1% of the step's samples (``learner.evaluation.infra``)."""
    scores = samples.scores
    total = sum(procs.gather_ints(len(scores.rewards)))
    passed = sum(procs.gather_ints(sum(bool(p) and not f for p, f in
                                       zip(scores.passed, scores.infra_error, strict=True))))
    refused = InfraCount(total, failed).refused
    return {"samples/infra_errors": failed,
            "accuracy": None if refused or not total else passed / total}


def sample_metrics(samples: StepSamples) -> dict[str, Any]:
    """This process's rewards, groups and lengths (sandbox failures left out: the rewards
    describe what the step trains on; ``infra_metrics`` has the accuracy and the count)."""
    graded, scores, roll = samples.graded, samples.scores, samples.rollout
    rewards = torch.tensor(scores.rewards, dtype=torch.float64)[graded]  # the env's reward
    n = max(int(graded.sum()), 1)
    out: dict[str, Any] = {
        "reward/mean": float(rewards.mean()) if rewards.numel() else float("nan"),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
    }
    for name in sorted({k for comp in scores.components for k in comp}):
        out[f"reward/{name}"] = sum(comp.get(name, 0.0) for comp, ok in
                                    zip(scores.components, graded.tolist(), strict=True) if ok) / n
    if samples.shaping is not None:  # the same keys on every process: they are averaged
        out["reward/overlong"] = float(samples.shaping[graded].mean()) if graded.any() else 0.0
    out.update({
        "group/std_mean": float(samples.moments.std.mean()),
        "group/frac_zero_std": float((~samples.reward_spread).float().mean()),
        "group/sampling_tries": samples.tries,
        "completion/len_mean": float(roll.lengths.float().mean()),
        "completion/truncated_frac": float(roll.truncated.float().mean()),
    })
    if samples.informative_groups is not None:  # global counts: averaging leaves them
        out["group/informative"] = samples.informative_groups
        out["group/short"] = samples.short
    if roll.action_mask is not None:
        out.update(episode_metrics(scores.infos, graded.tolist(), roll.action_mask.sum(-1)))
    return out
