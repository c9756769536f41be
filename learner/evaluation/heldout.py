"""Held-out evaluation on an env's test split: greedy accuracy and unbiased pass@k.

``sample`` generates and grades G completions per task (the gates' report builds on it too);
``evaluate`` uses it for the trainer's periodic ``eval/*`` metrics and returns per-task records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.base import TaskEnv
from learner.model import chat_prompt
from learner.sampling.chat import ChatBridge
from learner.sampling.episodes import is_multi_turn, run_episodes
from learner.sampling.rollout import Rollout, generate
from learner.sampling.scoring import RemoteScorer, Scores, score_all
from tasks import Task


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass
class EvalResult:
    """One record per evaluated task: its id, the greedy completion, correctness, sample counts."""

    records: list[dict[str, Any]] = field(default_factory=list)
    k: int = 1

    def metrics(self) -> dict[str, float]:
        scored = [r for r in self.records if not r["infra_error"]]
        out: dict[str, float] = {"n": float(len(scored))}
        if not scored:
            return out
        out["accuracy"] = sum(r["passed"] for r in scored) / len(scored)
        out["reward"] = sum(r["reward"] for r in scored) / len(scored)
        # Full marks: passed *and* every reward component at its maximum (the format too).
        out["full_marks"] = sum(
            bool(r["passed"]) and all(v >= 1.0 for v in r["components"].values())
            for r in scored) / len(scored)
        for name in sorted({k for r in scored for k in r["components"]}):
            out[f"reward/{name}"] = sum(r["components"].get(name, 0.0) for r in scored) / len(
                scored)
        if self.k > 1:
            out[f"pass@{self.k}"] = sum(
                pass_at_k(r["samples"], r["samples_correct"], self.k) for r in scored
            ) / len(scored)
        return out


def heldout_tasks(env: TaskEnv, size: int = 0, split: str = "test") -> list[Task]:
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
    env: TaskEnv,
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
) -> EvalResult:
    """Greedy-decode every task once; with ``k > 1`` also sample ``samples`` (default ``k``)."""
    n_samples = samples or k
    run = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, workers=workers,
               scorer=scorer, max_episode_tokens=max_episode_tokens, tool_role=tool_role)
    greedy = sample(model, tokenizer, env, tasks, group_size=1, greedy=True,
                    desc="held-out greedy", **run)
    sampled_correct = [int(g["passed"]) for g in greedy]
    if k > 1:
        sampled_correct = [0] * len(tasks)
        for row in sample(model, tokenizer, env, tasks, group_size=n_samples,
                          temperature=temperature, top_p=top_p, desc=f"held-out pass@{k}",
                          **run):
            sampled_correct[row["group"]] += int(row["passed"])
    result = EvalResult(k=k)
    for task, g, correct in zip(tasks, greedy, sampled_correct, strict=True):
        result.records.append({
            "task_id": task.id,
            "prompt": g["prompt"],
            "completion": g["completion"],
            "passed": g["passed"],
            "reward": g["reward"],
            "components": g["rewards"],
            "infra_error": g["infra_error"],
            "samples": n_samples if k > 1 else 1,
            "samples_correct": correct,
        })
    return result


def sample(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: TaskEnv,
           tasks: Sequence[Task], *, group_size: int, max_new_tokens: int, greedy: bool = False,
           temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 8, workers: int = 16,
           scorer: RemoteScorer | None = None, build: Callable[[Task], str] | None = None,
           desc: str | None = None, max_episode_tokens: int = 0,
           tool_role: str = "auto") -> list[dict[str, Any]]:
    """``group_size`` graded completions per task (prompts from ``build``, default the env's).

    One dict per completion: task_id, group (index of its task), prompt, completion, reward,
    rewards (components), passed, truncated, infra_error; on a multi-turn env also transcript
    (every turn with its role; ``completion`` is then the policy's turns), turns and
    tool_calls (``max_episode_tokens`` and ``tool_role`` as in training). ``desc`` shows a
    progress bar (tasks done, and whether a batch is generating or grading) on stderr.
    """
    build = build or env.prompt
    out: list[dict[str, Any]] = []
    bar = tqdm(total=len(tasks), desc=desc, unit="task", leave=False, dynamic_ncols=True,
               disable=desc is None)
    for start in range(0, len(tasks), batch_size):
        chunk = list(tasks[start:start + batch_size])
        prompts = [build(t) for t in chunk]
        if is_multi_turn(env):
            bar.set_postfix_str("episodes")
            eps = run_episodes(model, tokenizer, env, chunk, prompts,
                               group_size=group_size, max_new_tokens=max_new_tokens,
                               max_episode_tokens=max_episode_tokens, greedy=greedy,
                               temperature=temperature, top_p=top_p, workers=workers,
                               bridge=ChatBridge(tokenizer, tool_role))
            roll, scores = eps.rollout, eps.scores
        else:
            bar.set_postfix_str("generating")
            roll = generate(model, tokenizer, [chat_prompt(tokenizer, p) for p in prompts],
                            group_size=group_size, max_new_tokens=max_new_tokens, greedy=greedy,
                            temperature=temperature, top_p=top_p)
            bar.set_postfix_str("grading")
            scores = score_all(env, [t for t in chunk for _ in range(group_size)], roll.texts,
                               workers, scorer)
        out += _records(chunk, prompts, start, group_size, roll, scores)
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
        if roll.transcripts is not None:  # an episode: every turn, and what the env counted
            info = scores.infos[row]
            record.update(transcript=roll.transcripts[row], turns=info.get("turns"),
                          tool_calls=info.get("tool_calls"))
        out.append(record)
    return out
