"""Multi-turn episodes: the policy acts, the env answers (a tool's output), the policy acts again.

Token-in/token-out: a row's completion is the tokens the policy sampled, turn after turn, with
the tokens of each observation in between (the observation wrapped in the chat template and
tokenised on its own). The history is never re-tokenised from text, so the loss passes see
exactly the sampled tokens in exactly the context they were sampled in. ``action_mask`` marks
the policy's tokens (the loss); ``completion_mask`` marks all of them (the attention).

A turn stops at EOS, at its token budget, or at the end of the first complete tool call
(``env.tool_call_end`` on the turn's decoded text, checked as it grows; the turn is cut at the
token where the call ends). The turns of all live rows are sampled as one batch, then every
row's turn goes to its episode on a thread pool (the tool calls run concurrently in the sandbox
pool), and so on until every episode has ended. The env owns the syntax of a tool call and
what an observation says; nothing here knows a domain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from learner.model import chat_prompt
from learner.sampling.chat import ChatBridge
from learner.sampling.decoding import LENGTH, STOP, encode_prompts, left_pad, text_stop
from learner.sampling.engine import SamplingEngine
from learner.sampling.rollout import Rollout
from learner.sampling.scoring import Scores
from tasks import Task


def is_multi_turn(env: Any) -> bool:
    """Whether an env's episodes may take several steps (``max_turns > 1``)."""
    return int(getattr(env, "max_turns", 1) or 1) > 1


@dataclass
class _Row:
    task: Task
    prompt: int  # index into the prompts
    episode: Any
    transcript: list[dict[str, str]]
    tokens: list[int] = field(default_factory=list)
    action: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    info: dict[str, Any] | None = None
    truncated: bool = False
    needs_close: bool = False

    @property
    def done(self) -> bool:
        return self.info is not None


@dataclass
class Episodes:
    """A batch of finished episodes: the rollout the trainer consumes (its ``logprobs`` are
    the policy tokens' at sampling time, 0 on observation tokens), the env's grades, and the
    seconds spent generating and in the env's steps."""

    rollout: Rollout
    scores: Scores
    generate_s: float
    step_s: float


def generate_turn(engine: SamplingEngine, tokenizer: PreTrainedTokenizerBase,
                  contexts: list[list[int]], budgets: list[int], *,
                  tool_call_end: Callable[[str], int | None] | None,
                  temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                  compact_fraction: float = 0.25
                  ) -> tuple[list[list[int]], list[list[float]], list[str], int]:
    """One turn for each context (token ids, prompt and history): per row the sampled tokens,
    their log-probs at sampling time, why the turn stopped (``eos``, ``tool`` or ``length``),
    and the positions decoded in all. ``engine`` decodes, with a stop per row at a tool
    call's end."""
    device = engine.device
    ids, mask = left_pad(contexts, tokenizer.pad_token_id)
    stop = text_stop(tokenizer, tool_call_end) if tool_call_end is not None else None
    out = engine.decode(ids.to(device), mask.to(device),
                        budgets=torch.tensor(budgets, device=device),
                        eos=engine.eos_ids(tokenizer), pad_id=tokenizer.pad_token_id,
                        temperature=temperature, top_p=top_p, greedy=greedy, stop=stop,
                        compact_fraction=compact_fraction)
    n = out.lengths.tolist()
    tokens = [row[:k].tolist() for row, k in zip(out.tokens, n, strict=True)]
    logprobs = [row[:k].tolist() for row, k in zip(out.logprobs, n, strict=True)]
    why = ["tool" if s == STOP else s for s in out.stops]
    return tokens, logprobs, why, out.decoded


def run_episodes(engine: SamplingEngine, tokenizer: PreTrainedTokenizerBase,
                 env: LearnerEnv, tasks: Sequence[Task], prompts: Sequence[str], *,
                 group_size: int, max_new_tokens: int, max_episode_tokens: int = 0,
                 temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                 workers: int = 16, bridge: ChatBridge | None = None) -> Episodes:
    """``group_size`` episodes per task, to the end; ``prompts`` are the user messages (the
    env's prompts, or perturbed ones), put through the chat template here. ``engine`` samples
    the turns (``HFEngine(model)``: the learner's own loop).

    ``max_new_tokens`` bounds each turn; ``max_episode_tokens`` (0: no bound beyond the turn
    limit) bounds a row's whole completion, observations included. An episode whose turn hits
    a bound is ``truncated``; one whose observation leaves no room for another token is closed
    with an empty final turn (graded as no answer) and marked truncated too.
    """
    bridge = bridge or ChatBridge(tokenizer)
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [chat_prompt(tokenizer, p)
                                                         for p in prompts])
    unpadded = [ids[m.bool()].tolist() for ids, m in zip(prompt_ids, prompt_mask, strict=True)]
    rows = [_Row(task, i, env.episode(task), [{"role": "user", "content": prompts[i]}])
            for i, task in enumerate(tasks) for _ in range(group_size)]
    steps = _EnvSteps(env, bridge, engine.eos_ids(tokenizer).tolist(), max_episode_tokens)
    decoded, gen_s = 0, 0.0
    # One engine session for all the turns (hf: the weights are packed once).
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(rows)))) as pool, \
            engine.session():
        live = rows
        while live:
            budgets = [max_new_tokens if not max_episode_tokens else
                       min(max_new_tokens, max_episode_tokens - len(r.tokens)) for r in live]
            t0 = time.perf_counter()
            turns, lps, why, n = generate_turn(
                engine, tokenizer, [unpadded[r.prompt] + r.tokens for r in live], budgets,
                tool_call_end=getattr(env, "tool_call_end", None), temperature=temperature,
                top_p=top_p, greedy=greedy)
            gen_s += time.perf_counter() - t0
            decoded += n
            actions = []
            for row, toks, lp, stop in zip(live, turns, lps, why, strict=True):
                row.tokens += toks
                row.action += [1] * len(toks)
                row.logprobs += lp
                row.truncated = stop == LENGTH
                text = str(tokenizer.decode(toks, skip_special_tokens=True))  # one sequence: a str
                row.transcript.append({"role": "assistant", "content": text})
                actions.append(text)
            steps.run(pool, live, actions)
            closing = [r for r in live if r.needs_close and not r.done]
            if closing:
                steps.run(pool, closing, [""] * len(closing))
            live = [r for r in live if not r.done]
    scores = Scores.from_results([r.reward for r in rows], [r.info or {} for r in rows])
    # The rollout lives on the engine's device, as a single-turn one does.
    return Episodes(_rollout(rows, prompt_ids.to(engine.device), prompt_mask.to(engine.device),
                             group_size, tokenizer, decoded),
                    scores, gen_s, steps.seconds)


class _EnvSteps:
    """Every row's turn to its episode at once, on a thread pool; each observation appended to
    its row as tokens (or, when no room is left for another turn, the episode marked to close)."""

    def __init__(self, env: LearnerEnv, bridge: ChatBridge, eos: list[int], max_episode_tokens: int):
        self.env, self.bridge, self.eos = env, bridge, eos
        self.max_episode_tokens = max_episode_tokens
        self.seconds = 0.0

    def run(self, pool: ThreadPoolExecutor, batch: list[_Row], actions: list[str]) -> None:
        t0 = time.perf_counter()
        results = list(pool.map(lambda r, a: r.episode.step(a), batch, actions))
        self.seconds += time.perf_counter() - t0
        for row, (obs, reward, terminated, truncated, info) in zip(batch, results, strict=True):
            row.reward += float(reward)
            if terminated or truncated:
                row.info, row.truncated = info, row.truncated or bool(truncated)
                continue
            if row.needs_close:
                raise RuntimeError(f"{type(self.env).__name__} did not end an episode on an "
                                   "empty final turn")
            row.transcript.append({"role": self.bridge.role, "content": str(obs)})
            extra = self.bridge.tokens(str(obs), row.tokens[-1], self.eos)
            if self.max_episode_tokens and len(row.tokens) + len(extra) >= self.max_episode_tokens:
                row.needs_close = row.truncated = True  # no room for another turn
                continue
            row.tokens += extra
            row.action += [0] * len(extra)
            row.logprobs += [0.0] * len(extra)


def _rollout(rows: list[_Row], prompt_ids: Tensor, prompt_mask: Tensor, group_size: int,
             tokenizer: PreTrainedTokenizerBase, decoded: int) -> Rollout:
    width = max(len(r.tokens) for r in rows)
    device = prompt_ids.device  # the engine's, where the rows' tensors are made

    def padded(values: list[list], pad: float, dtype: torch.dtype) -> Tensor:
        return torch.tensor([v + [pad] * (width - len(v)) for v in values], dtype=dtype,
                            device=device)

    ids = padded([r.tokens for r in rows], tokenizer.pad_token_id, torch.long)
    mask = padded([[1] * len(r.tokens) for r in rows], 0, torch.long)
    action = padded([r.action for r in rows], 0, torch.long)
    logprobs = padded([r.logprobs for r in rows], 0.0, torch.float32)
    return Rollout(
        prompt_ids=prompt_ids.repeat_interleave(group_size, 0),
        prompt_mask=prompt_mask.repeat_interleave(group_size, 0),
        completion_ids=ids, completion_mask=mask, action_mask=action, logprobs=logprobs,
        truncated=torch.tensor([r.truncated for r in rows], device=device),
        # What the policy wrote, for the flags and the monitor: its turns, not the tool's.
        texts=["\n\n".join(t["content"] for t in r.transcript if t["role"] == "assistant")
               for r in rows],
        generated_tokens=decoded,
        transcripts=[r.transcript for r in rows],
    )


def episode_metrics(infos: Sequence[dict[str, Any]], valid: Sequence[bool],
                    action_tokens: Tensor) -> dict[str, float]:
    """``turns/mean``, ``tool/calls_mean``, ``tool/use_frac`` (episodes with a tool call),
    ``tool/error_frac`` (of the tool calls), ``tool/s`` (seconds in the tool per episode) over
    the episodes that were graded (infrastructure failures left out), and
    ``completion/policy_len_mean`` (the policy's own tokens). The keys are always the same
    (processes average them key by key); a share of nothing is NaN, a gap in the plots."""
    kept = [info for info, ok in zip(infos, valid, strict=True) if ok]
    nan = float("nan")
    n = len(kept)
    calls = [int(i.get("tool_calls", 0)) for i in kept]
    errors = sum(int(i.get("tool_errors", 0)) for i in kept)
    return {
        "completion/policy_len_mean": float(action_tokens.float().mean()),
        "turns/mean": sum(int(i.get("turns", 1)) for i in kept) / n if n else nan,
        "tool/calls_mean": sum(calls) / n if n else nan,
        "tool/use_frac": sum(c > 0 for c in calls) / n if n else nan,
        "tool/error_frac": errors / sum(calls) if sum(calls) else nan,
        "tool/s": sum(float(i.get("tool_s", 0.0)) for i in kept) / n if n else nan,
    }
