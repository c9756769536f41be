"""Evaluation gates: the measurements that tell real improvement from verifier gaming.

``run_gates`` evaluates one policy on held-out tasks and returns every section of the report:
greedy accuracy and pass@k, the reward distribution (total and per component), within-group
reward variance, accuracy under prompt perturbations, flagged samples and the general check.
``perturbation_metrics`` is the small piece the trainer logs every ``--eval-every`` steps.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.base import max_reward
from envs.contract import LearnerEnv
from learner.evaluation.flags import flag_samples
from learner.evaluation.general import general_check
from learner.evaluation.heldout import pass_at_k, sample
from learner.evaluation.infra import InfraCount, counted_mean
from learner.sampling.scoring import RemoteScorer
from tasks import Task

HIST_BINS = 10
ZERO_STD = 1e-6


@dataclass
class GateSettings:
    group_size: int = 4
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    batch_size: int = 8  # prompts per generate call
    workers: int = 16
    general_limit: int = 50
    flag_min_reward: float | None = None  # default: half the env's maximum reward
    max_flagged: int = 50
    perturbations: bool = True
    max_episode_tokens: int = 0  # multi-turn envs: as in training
    tool_role: str = "auto"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- statistics -----------------------------------------------------------------------------
def describe(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    return {"n": len(values), "mean": statistics.fmean(values),
            "std": statistics.pstdev(values), "min": min(values), "max": max(values)}


def histogram(values: Sequence[float], bins: int = HIST_BINS,
              span: tuple[float, float] | None = None) -> dict[str, list[float] | list[int]]:
    """Counts over ``bins`` equal bins (edges included); counts sum to ``len(values)``."""
    lo, hi = span or (min([0.0, *values]), max([1.0, *values]))
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=bins, range=(lo, hi))
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def _scored(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    # A sandbox failure says nothing about the policy: the distributions describe graded
    # samples; accuracies count every sample (``counted_mean``).
    return [s for s in samples if not s["infra_error"]]


def reward_distribution(samples: Sequence[dict[str, Any]], components: Sequence[str],
                        max_total: float = 1.0) -> dict[str, Any]:
    """Histogram and mean/std of the total reward and of each component; the total's histogram
    spans 0 to ``max_total`` (the weighted sum at full marks, 1.1 for correct + 0.1 format)."""
    scored = _scored(samples)
    totals = [s["reward"] for s in scored]
    span = (min([0.0, *totals]), max([max_total, *totals]))
    out: dict[str, Any] = {"total": {**describe(totals), "histogram": histogram(totals, span=span)}}
    out["components"] = {}
    for name in components:
        values = [s["rewards"].get(name, 0.0) for s in scored]
        out["components"][name] = {**describe(values), "histogram": histogram(values, span=(0, 1))}
    return out


def group_variance(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Within-group reward std (unbiased, as the trainer's advantages use) and the share of
    groups with zero variance: every completion scored alike, so GRPO learns nothing there."""
    groups: dict[int, list[float]] = {}
    for s in _scored(samples):
        groups.setdefault(s["group"], []).append(s["reward"])
    stds = [statistics.stdev(r) if len(r) > 1 else 0.0 for r in groups.values()]
    zero = sum(sd < ZERO_STD for sd in stds)
    all_same = [r[0] for r in groups.values() if max(r) - min(r) < ZERO_STD]
    return {
        "n_groups": len(stds),
        "zero_variance_fraction": zero / len(stds) if stds else None,
        "zero_variance_groups": {"all_high": sum(v > 0 for v in all_same),
                                 "all_zero": sum(v <= 0 for v in all_same)},
        "std": describe(stds),
        "histogram": histogram(stds, span=(0.0, max([0.5, *stds]))),
    }


def heldout_accuracy(greedy: Sequence[dict[str, Any]], sampled: Sequence[dict[str, Any]],
                     k: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(accuracy section, pass_at_k section) from one greedy and ``k`` sampled completions/task.

    A sample whose grading failed for infrastructure counts as a miss, never leaves the
    denominator, and each section gives the count beside its figures; past 1% of its samples
    the figures are None and ``refused`` says why in one line (``learner.evaluation.infra``).
    pass@k uses the learner's unbiased estimator over each task's samples.
    """
    count = InfraCount.of(greedy)
    accuracy = {
        "greedy": counted_mean(greedy, lambda g: g["passed"]),
        "reward": counted_mean(greedy, lambda g: g["reward"]),
        "n": len(greedy),
        "infra_errors": count.failures,
        "infra_reason": count.first_reason,
        "refused": count.refusal(),
    }
    hits: dict[int, list[bool]] = {}
    for s in sampled:
        hits.setdefault(s["group"], []).append(bool(s["passed"]) and not s["infra_error"])
    counts = [(len(h), sum(h)) for h in hits.values() if h]
    sampled_count = InfraCount.of(sampled)
    passk: dict[str, Any] = {"k": k, "n": len(counts),
                             "estimator": "unbiased (Chen et al. 2021)",
                             "infra_errors": sampled_count.failures,
                             "refused": sampled_count.refusal("pass@k")}
    if counts:
        ok = not sampled_count.refused
        passk["pass@1"] = statistics.fmean(pass_at_k(n, c, 1) for n, c in counts) if ok else None
        passk[f"pass@{k}"] = (statistics.fmean(pass_at_k(n, c, min(k, n)) for n, c in counts)
                              if ok else None)
    return accuracy, passk


def episode_summary(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Multi-turn envs: mean turns, the share of episodes that called the tool, calls per
    episode (over the graded episodes) and accuracy with and without a call (every episode,
    an infrastructure failure a miss; None past 1% of them)."""
    scored = _scored(samples)
    used = [s for s in samples if s.get("tool_calls")]
    unused = [s for s in samples if not s.get("tool_calls")]
    refused = InfraCount.of(samples).refused
    return {
        "n": len(samples),
        "infra_errors": len(samples) - len(scored),
        "turns_mean": statistics.fmean(s["turns"] or 0 for s in scored) if scored else None,
        "tool_use": sum(bool(s.get("tool_calls")) for s in scored) / len(scored)
        if scored else None,
        "tool_calls_mean": (statistics.fmean(s["tool_calls"] or 0 for s in scored)
                            if scored else None),
        "accuracy_with_tool": None if refused else counted_mean(used, lambda s: s["passed"]),
        "accuracy_without_tool": (None if refused
                                  else counted_mean(unused, lambda s: s["passed"])),
    }


# -- perturbations --------------------------------------------------------------------------
def _summarise(samples: Sequence[dict[str, Any]], components: Sequence[str]) -> dict[str, Any]:
    """A variant's figures over every sample, an infrastructure failure a miss (None past 1%)."""
    def component(c: str) -> Callable[[Mapping[str, Any]], float]:
        return lambda s: s["rewards"].get(c, 0.0)

    means = {c: counted_mean(samples, component(c)) for c in components}
    return {
        "n": len(samples),
        "infra_errors": InfraCount.of(samples).failures,
        "score": means[components[0]] if components else None,
        "components": means,
        "passed": counted_mean(samples, lambda s: s["passed"]),
    }


def perturbed_prompts(env: LearnerEnv, tasks: Sequence[Task], original: bool = False
                      ) -> tuple[list[str], list[Task], list[str]]:
    """The variants' names (``original`` first when asked: the pack's own prompt), and their
    tasks and prompts, variant by variant: what ``perturbation_accuracy`` samples."""
    names = (["original"] if original else []) + (
        list(env.perturbations(tasks[0])) if tasks else [])
    prompts = [env.prompt(t) if name == "original" else env.perturbations(t)[name]
               for name in names for t in tasks]
    return names, [t for _ in names for t in tasks], prompts


def perturbation_accuracy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                          env: LearnerEnv, tasks: Sequence[Task], *, max_new_tokens: int,
                          batch_size: int = 8, workers: int = 16,
                          scorer: RemoteScorer | None = None,
                          original: Sequence[dict[str, Any]] | None = None,
                          gather: Callable[[list], list] | None = None,
                          graded: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Greedy score of ``tasks`` under each of the env's perturbations (``env.perturbations``),
    next to the unperturbed prompt (``original``: its greedy samples when already computed;
    ``graded``: with it, the perturbed prompts' greedy samples when already computed, in
    ``perturbed_prompts``' order, as the held-out evaluation's own pass gives them).

    ``score`` is the mean of the env's first ``check_components`` entry, the component that does
    not depend on the answer's format; ``samples`` keeps the graded completions for the report.
    With several processes each grading its shard of ``tasks``, ``gather`` (accelerate's
    ``gather_object``) joins the samples so every process reports the same means.
    """
    gather = gather or list
    components = env.check_components
    descriptions = {kind.name: kind.description for kind in env.perturbation_kinds}
    # Every variant's prompts go through one sampling pass, ``batch_size`` rows at once (a
    # step's P x G rows in training): a pass per variant generated a few rows per call.
    variants, repeated, prompts = perturbed_prompts(env, tasks, original=original is None)
    names = [n for n in variants if n != "original"]
    if graded is None or original is None:
        graded = sample(model, tokenizer, env, repeated, prompts=prompts,
                        max_new_tokens=max_new_tokens, group_size=1, greedy=True,
                        batch_size=batch_size, workers=workers, scorer=scorer,
                        desc="perturbed prompts")
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for j, name in enumerate(variants):
        rows = graded[j * len(tasks):(j + 1) * len(tasks)]
        by_variant[name] = gather([{**r, "group": r["group"] - j * len(tasks)} for r in rows])
    if original is None:
        original = by_variant.pop("original")
    results = {"original": {"description": "the pack's own prompt",
                            **_summarise(original, components)}}
    samples: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        graded = by_variant[name]
        results[name] = {"description": descriptions.get(name, ""),
                         **_summarise(graded, components),
                         "example_prompt": graded[0]["prompt"] if graded else None}
        samples[name] = graded
    base = results["original"]["score"]
    for r in results.values():
        r["delta_vs_original"] = (None if base is None or r["score"] is None
                                  else r["score"] - base)
    return {"env": env.env_id or type(env).__name__, "check": list(components),
            "results": results, "samples": samples}


def perturbation_metrics(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                         env: LearnerEnv, tasks: Sequence[Task], *, max_new_tokens: int,
                         batch_size: int = 8, workers: int = 16,
                         scorer: RemoteScorer | None = None,
                         gather: Callable[[list], list] | None = None,
                         original: Sequence[dict[str, Any]] | None = None,
                         graded: Sequence[dict[str, Any]] | None = None) -> dict[str, float]:
    """``eval/perturb/<name>`` -> score, for the trainer's metrics.jsonl (``original`` and
    ``graded``: as ``perturbation_accuracy``'s)."""
    result = perturbation_accuracy(model, tokenizer, env, tasks, max_new_tokens=max_new_tokens,
                                   batch_size=batch_size, workers=workers, scorer=scorer,
                                   original=original, gather=gather, graded=graded)
    return {f"eval/perturb/{name}": r["score"] for name, r in result["results"].items()
            if r["score"] is not None}


# -- everything for one policy --------------------------------------------------------------
def _public(sample: dict[str, Any]) -> dict[str, Any]:
    keep = ("task_id", "prompt", "completion", "reward", "rewards", "passed", "truncated",
            "infra_error", "infra_reason", "flags", "source", "transcript", "turns",
            "tool_calls")
    return {k: sample[k] for k in keep if k in sample}


def run_gates(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: LearnerEnv,
              tasks: Sequence[Task], settings: GateSettings,
              log: Callable[[str], None] | None = None,
              scorer: RemoteScorer | None = None) -> dict[str, Any]:
    """Every report section for one policy; ``samples`` (all graded completions) rides along.

    ``log`` receives a line after each phase (generation on CPU takes minutes); ``scorer``
    grades remotely (``learner.sampling.scoring.score_all``).
    """
    s = settings
    lap = _Laps(log)
    torch.manual_seed(s.seed)  # generate() samples from torch's global generator
    episodes: dict[str, Any] = dict(max_episode_tokens=s.max_episode_tokens,
                                    tool_role=s.tool_role)
    greedy = sample(model, tokenizer, env, tasks, group_size=1, greedy=True,
                    max_new_tokens=s.max_new_tokens, batch_size=s.batch_size, workers=s.workers,
                    scorer=scorer, desc="greedy", **episodes)
    lap("greedy_s")
    sampled = sample(model, tokenizer, env, tasks, group_size=s.group_size,
                     max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p,
                     batch_size=s.batch_size, workers=s.workers, scorer=scorer,
                     desc=f"sampled x{s.group_size}", **episodes)
    lap("sampled_s")
    accuracy, passk = heldout_accuracy(greedy, sampled, s.group_size)
    components = list(env.default_weights)
    report: dict[str, Any] = {
        "accuracy": accuracy,
        "pass_at_k": passk,
        "reward_distribution": reward_distribution(sampled, components, max_reward(env)),
        "group_variance": group_variance(sampled),
    }
    if greedy and "turns" in greedy[0]:
        report["episodes"] = {"greedy": episode_summary(greedy),
                              "sampled": episode_summary(sampled)}
    perturbed: dict[str, list[dict[str, Any]]] = {}
    if s.perturbations:
        result = perturbation_accuracy(model, tokenizer, env, tasks,
                                       max_new_tokens=s.max_new_tokens,
                                       batch_size=s.batch_size, workers=s.workers,
                                       scorer=scorer, original=greedy)
        perturbed = result.pop("samples")
        report["perturbations"] = result
        lap("perturbations_s")
    report["flagged"] = flagged_section(env, greedy, sampled, perturbed, s)
    lap("flags_s")
    if s.general_limit:
        if log:  # the check is a fixed cost, a large share of a short evaluation: say so
            log(f"  general check: {s.general_limit} ARC-Easy items by log-likelihood "
                "(--general-limit 0 skips it)")
        report["general"] = general_check(model, tokenizer, s.general_limit)
        lap("general_s")
    report["timing"] = lap.timing
    report["samples"] = [_public({**x, "source": "sampled"}) for x in sampled] + \
        [_public({**x, "source": "greedy"}) for x in greedy]
    return report


def flagged_section(env: LearnerEnv, greedy: Sequence[dict[str, Any]],
                    sampled: Sequence[dict[str, Any]],
                    perturbed: dict[str, list[dict[str, Any]]],
                    settings: GateSettings) -> dict[str, Any]:
    """The high-reward samples of every pass that the env's ``flag`` hook flags, counted by
    reason (the first ``max_flagged`` of them kept whole)."""
    min_reward = settings.flag_min_reward
    if min_reward is None:
        min_reward = max_reward(env) / 2
    candidates = ([{**x, "source": "sampled"} for x in sampled]
                  + [{**x, "source": "greedy"} for x in greedy]
                  + [{**x, "source": f"perturbation:{name}"}
                     for name, rows in perturbed.items() for x in rows])
    flagged = flag_samples(candidates, env, min_reward=min_reward)
    reasons: dict[str, int] = {}
    for f in flagged:
        for flag in f["flags"]:
            reasons[flag["reason"]] = reasons.get(flag["reason"], 0) + 1
    return {"min_reward": min_reward, "n_checked": len(candidates),
            "n_high_reward": sum(c["reward"] >= min_reward for c in candidates),
            "n_flagged": len(flagged), "by_reason": reasons,
            "samples": [_public(f) for f in flagged[:settings.max_flagged]]}


class _Laps:
    """Seconds per phase of the report; ``log`` hears of each as it ends (generation on CPU
    takes minutes)."""

    def __init__(self, log: Callable[[str], None] | None):
        self.log, self._clock = log, time.perf_counter()
        self.timing: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timing[name] = round(now - self._clock, 3)
        self._clock = now
        if self.log:
            self.log(f"  {name.removesuffix('_s')}: {self.timing[name]:.1f} s")
