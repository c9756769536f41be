"""Held-out evaluation on an env's test split: greedy accuracy and unbiased pass@k.

``sample`` generates and grades G completions per task (the gates' report builds on it too);
``evaluate`` uses it for the trainer's periodic ``eval/*`` metrics and returns per-task records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from learner.evaluation.infra import InfraCount, counted_mean
from learner.evaluation.result_shape import pass_at_k  # the one estimator (stable form)
from learner.sampling.chat import ChatBridge
from learner.sampling.engine import HFEngine
from learner.sampling.episodes import is_multi_turn
from learner.sampling.graded import sample_graded
from learner.sampling.rollout import Rollout
from learner.sampling.scoring import RemoteScorer, Scores, failure_reason
from tasks import Task


@dataclass
class EvalResult:
    """One record per evaluated task: its id, the greedy completion, correctness, sample counts.

    Every figure counts a task whose grading failed for infrastructure as a miss and reports
    how many did beside it (``infra_errors``; ``sampled_infra_errors`` for pass@k's samples):
    past 1% of the samples the figures are None (``learner.evaluation.infra``).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    k: int = 1
    #: ``evaluate``'s ``also`` prompts' greedy samples (as ``sample`` gives them), in order
    also: list[dict[str, Any]] = field(default_factory=list)

    def infra(self) -> InfraCount:
        """The greedy pass's failures: what the accuracy's denominator holds."""
        return InfraCount.of(self.records)

    def sampled_infra(self) -> InfraCount:
        """pass@k's samples' failures (``k`` > 1)."""
        records = self.records
        reason = next((r.get("infra_reason") for r in records
                       if r.get("samples_infra") and r.get("infra_reason")), None)
        return InfraCount(sum(r["samples"] for r in records),
                          sum(r.get("samples_infra", 0) for r in records), reason)

    def metrics(self) -> dict[str, float | int | str | None]:
        records, count = self.records, self.infra()
        out: dict[str, float | int | str | None] = {
            "n": float(len(records)), "infra_errors": count.failures}
        if count.failures:
            out["infra_reason"] = count.first_reason or "no reason given"
        if not records:
            return out
        out["accuracy"] = counted_mean(records, lambda r: r["passed"])
        out["reward"] = counted_mean(records, lambda r: r["reward"])
        # Full marks: passed *and* every reward component at its maximum (the format too).
        out["full_marks"] = counted_mean(records, lambda r: bool(r["passed"]) and all(
            v >= 1.0 for v in r["components"].values()))
        for name in sorted({k for r in records if not r["infra_error"]
                            for k in r["components"]}):
            out[f"reward/{name}"] = counted_mean(records, _component(name))
        if self.k > 1:
            sampled = self.sampled_infra()
            out["sampled_infra_errors"] = sampled.failures
            # A failed sample counts among the task's n samples, never among its c correct.
            out[f"pass@{self.k}"] = None if sampled.refused else sum(
                pass_at_k(r["samples"], r["samples_correct"], self.k) for r in records
            ) / len(records)
        return out


def _component(name: str) -> Callable[[Mapping[str, Any]], float]:
    """A record's reward component ``name`` (0 where it has none)."""
    return lambda r: r["components"].get(name, 0.0)


def heldout_tasks(env: LearnerEnv, size: int = 0, split: str = "test") -> list[Task]:
    """The first ``size`` tasks of the held-out split (all of it when ``size`` is 0)."""
    total = env.pack.size(split)
    if total is None:
        if not size:
            raise ValueError(f"split '{split}' is unbounded: give an evaluation size")
        total = size
    n = min(size, total) if size else total
    return [env.pack.task_at(split, i) for i in range(n)]


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    env: LearnerEnv,
    tasks: list[Task],
    *,
    max_new_tokens: int,
    k: int = 1,
    samples: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    workers: int = 16,
    scorer: RemoteScorer | None = None,
    max_episode_tokens: int = 0,
    tool_role: str = "auto",
    also: Sequence[tuple[Task, str]] = (),
) -> EvalResult:
    """Greedy-decode every task once; with ``k > 1`` also sample ``samples`` (default ``k``).
    ``also``: more (task, prompt) pairs decoded greedily in the same pass (the perturbed
    prompts: one pass keeps its batch full where two each ended half empty), returned in
    ``EvalResult.also`` with ``group`` counted within them."""
    n_samples = samples or k
    run: dict[str, Any] = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, workers=workers,
               scorer=scorer, max_episode_tokens=max_episode_tokens, tool_role=tool_role)
    build = env.prompt
    both = sample(model, tokenizer, env, [*tasks, *(t for t, _ in also)], group_size=1,
                  greedy=True, desc="held-out greedy", **run,
                  prompts=[*(build(t) for t in tasks), *(p for _, p in also)])
    greedy, extra = both[:len(tasks)], both[len(tasks):]
    sampled_correct = [int(g["passed"] and not g["infra_error"]) for g in greedy]
    sampled_infra = [int(g["infra_error"]) for g in greedy]
    reasons = [g.get("infra_reason") for g in greedy]
    if k > 1:
        sampled_correct, sampled_infra = [0] * len(tasks), [0] * len(tasks)
        for row in sample(model, tokenizer, env, tasks, group_size=n_samples,
                          temperature=temperature, top_p=top_p, desc=f"held-out pass@{k}",
                          **run):
            i = row["group"]
            sampled_correct[i] += int(row["passed"] and not row["infra_error"])
            sampled_infra[i] += int(row["infra_error"])
            reasons[i] = reasons[i] or row.get("infra_reason")
    result = EvalResult(k=k, also=[{**r, "group": r["group"] - len(tasks)} for r in extra])
    for task, g, correct, failed, reason in zip(tasks, greedy, sampled_correct, sampled_infra,
                                                reasons, strict=True):
        record = {
            "task_id": task.id,
            "prompt": g["prompt"],
            "completion": g["completion"],
            "passed": g["passed"],
            "reward": g["reward"],
            "components": g["rewards"],
            "infra_error": g["infra_error"],
            "samples": n_samples if k > 1 else 1,
            "samples_correct": correct,
            "samples_infra": failed,
        }
        if reason:
            record["infra_reason"] = reason
        result.records.append(record)
    return result


#: Batches' worth of prompts per refilled generate call: the progress bar moves per call.
REFILLED = 4


def sample(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: LearnerEnv,
           tasks: Sequence[Task], *, group_size: int, max_new_tokens: int, greedy: bool = False,
           temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 8, workers: int = 16,
           scorer: RemoteScorer | None = None, build: Callable[[Task], str] | None = None,
           desc: str | None = None, max_episode_tokens: int = 0,
           tool_role: str = "auto", prompts: Sequence[str] | None = None
           ) -> list[dict[str, Any]]:
    """``group_size`` graded completions per task (prompts from ``build``, default the env's,
    or ``prompts``, one per task), ``batch_size`` tasks per generate call; a greedy single-turn
    pass decodes ``batch_size`` rows at once, each finished row's place taken by the next
    task's prompt (``REFILLED`` batches' worth of tasks per call, ``decoding.decode``'s
    ``max_rows``).

    One dict per completion: task_id, group (index of its task), prompt, completion, reward,
    rewards (components), passed, truncated, infra_error (and infra_reason when it holds); on a
    multi-turn env also transcript
    (every turn with its role; ``completion`` is then the policy's turns), turns and
    tool_calls (``max_episode_tokens`` and ``tool_role`` as in training). ``desc`` shows a
    progress bar (tasks done, and whether a batch is generating or grading) on stderr.
    """
    build = build or env.prompt
    bridge = ChatBridge(tokenizer, tool_role) if is_multi_turn(env) else None
    out: list[dict[str, Any]] = []
    bar = tqdm(total=len(tasks), desc=desc, unit="task", leave=False, dynamic_ncols=True,
               disable=desc is None)
    # Rows of one prompt each finish at different lengths: refilled, a call keeps its batch
    # full where calls of ``batch_size`` prompts ended with a few rows decoding alone.
    refill = group_size == 1 and bridge is None
    per_call = batch_size * REFILLED if refill else batch_size
    for start in range(0, len(tasks), per_call):
        chunk = list(tasks[start:start + per_call])
        chunk_prompts = (list(prompts[start:start + per_call]) if prompts is not None
                         else [build(t) for t in chunk])
        bar.set_postfix_str("episodes" if bridge else "generating and grading")
        graded = sample_graded(lambda: nullcontext(HFEngine(model)), tokenizer, env, chunk,
                               chunk_prompts, group_size=group_size, max_new_tokens=max_new_tokens,
                               bridge=bridge, max_episode_tokens=max_episode_tokens,
                               greedy=greedy, temperature=temperature, top_p=top_p,
                               workers=workers, scorer=scorer,
                               max_rows=batch_size if refill else 0)
        roll, scores = graded.rollout, graded.scores
        out += _records(chunk, chunk_prompts, start, group_size, roll, scores)
        bar.update(len(chunk))
    bar.close()
    return out


def _records(chunk: list[Task], prompts: list[str], start: int, group_size: int,
             roll: Rollout, scores: Scores) -> list[dict[str, Any]]:
    """One dict per completion of ``chunk`` (tasks ``start`` on), as ``sample`` returns them."""
    out = []
    for row, text in enumerate(roll.texts):
        i = row // group_size
        record = {"task_id": chunk[i].id, "group": start + i, "prompt": prompts[i],
                  "completion": text, "reward": scores.rewards[row],
                  "rewards": scores.components[row], "passed": scores.passed[row],
                  "truncated": bool(roll.truncated[row]), "infra_error": scores.infra_error[row]}
        if record["infra_error"]:  # what the sandbox said: the refusal line quotes the first
            record["infra_reason"] = (failure_reason(scores.infos[row])
                                      if row < len(scores.infos) else "the sandbox failed")
        if roll.transcripts is not None:  # an episode: every turn, and what the env counted
            info = scores.infos[row]
            record.update(transcript=roll.transcripts[row], turns=info.get("turns"),
                          tool_calls=info.get("tool_calls"))
        out.append(record)
    return out
