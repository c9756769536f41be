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
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.base import TaskEnv, is_infra_error
from learner.kv_cache import decode_cache
from learner.model import cache_kwarg, chat_prompt
from learner.onednn_linear import packed_weights
from learner.rollout import Rollout, _eos_ids, _sample, decode_step, encode_prompts
from learner.scoring import Scores
from tasks import Task

#: Roles tried, in order, for observations: the first one the chat template renders is used.
TOOL_ROLES = ("tool", "ipython", "user")
_MARK = "\u2063grpo-gym-turn\u2063"  # an assistant turn no template rewrites
_OBS = "\u2063grpo-gym-observation\u2063"


class TemplateError(RuntimeError):
    """The model's chat template cannot carry a multi-turn conversation."""


def is_multi_turn(env: Any) -> bool:
    """Whether an env's episodes may take several steps (``max_turns > 1``)."""
    return int(getattr(env, "max_turns", 1) or 1) > 1


def _render(tokenizer: PreTrainedTokenizerBase, role: str, observation: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": "."}, {"role": "assistant", "content": _MARK},
         {"role": role, "content": observation}], tokenize=False, add_generation_prompt=True)


def detect_tool_role(tokenizer: PreTrainedTokenizerBase) -> str:
    """The first of ``TOOL_ROLES`` the template renders after an assistant turn (some templates
    raise on roles they do not know, others drop the message silently)."""
    for role in TOOL_ROLES:
        try:
            text = _render(tokenizer, role, _OBS)
        except Exception:  # noqa: BLE001 - a template refusing the role is the answer
            continue
        if _MARK in text and _OBS in text.split(_MARK, 1)[1]:
            return role
    raise TemplateError("the chat template renders no tool, ipython or user message after an "
                        "assistant turn; it cannot carry a multi-turn episode")


class ChatBridge:
    """The tokens between two policy turns: the end of the assistant turn, the observation in
    the template's tool role (``role``: one of ``TOOL_ROLES`` or ``auto``) and the opening of
    the next assistant turn."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, role: str = "auto"):
        self.tokenizer = tokenizer
        self.role = detect_tool_role(tokenizer) if role == "auto" else role
        try:
            _render(tokenizer, self.role, _OBS)
        except Exception as exc:  # noqa: BLE001
            raise TemplateError(f"the chat template cannot render role '{self.role}': {exc}") \
                from exc

    def text(self, observation: str) -> str:
        rendered = _render(self.tokenizer, self.role, observation)
        return rendered.split(_MARK, 1)[1]

    def tokens(self, observation: str, last_token: int | None = None,
               eos_ids: Sequence[int] = ()) -> list[int]:
        """``last_token``: the policy's last token; when it is an EOS the policy already closed
        its turn, and the template's own closing text is not added a second time."""
        text = self.text(observation)
        if last_token is not None and last_token in eos_ids:
            closing = self.tokenizer.decode([last_token])
            if closing and text.startswith(closing):
                text = text[len(closing):]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]


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
    """A batch of finished episodes: the rollout the trainer consumes, the env's grades, and
    (``record_logprobs``) each completion token's log-prob at sampling time (0 on observation
    tokens), at the sampling temperature."""

    rollout: Rollout
    scores: Scores
    logprobs: list[list[float]] | None
    generate_s: float
    step_s: float


def _call_cut(tokenizer: PreTrainedTokenizerBase, tool_call_end: Callable[[str], int | None],
              tokens: list[int]) -> int | None:
    """How many of a turn's tokens to keep when they hold a complete tool call, else None."""
    end = tool_call_end(tokenizer.decode(tokens, skip_special_tokens=True))
    if end is None:
        return None
    keep = len(tokens)
    # The call may have ended a few tokens back (the env needed to see what followed it).
    while keep > 1 and len(tokenizer.decode(tokens[:keep - 1], skip_special_tokens=True)) >= end:
        keep -= 1
    return keep


@torch.no_grad()
def generate_turn(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                  contexts: list[list[int]], budgets: list[int], *,
                  tool_call_end: Callable[[str], int | None] | None,
                  temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                  compact_fraction: float = 0.25
                  ) -> tuple[list[list[int]], list[list[float]], list[str], int]:
    """One turn for each context (token ids, prompt and history): per row the sampled tokens,
    their log-probs at ``temperature``, why the turn stopped (``eos``, ``tool`` or
    ``length``), and the number of tokens sampled in all (tokens after a call's end included).

    Same decoding as ``learner.rollout.generate`` (KV cache, finished rows leave the batch), on
    contexts of different lengths, left-padded, with a stop per row at a tool call's end.
    """
    device = next(model.parameters()).device
    n, width = len(contexts), max(len(c) for c in contexts)
    pad_id = tokenizer.pad_token_id
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, ctx in enumerate(contexts):
        ids[i, width - len(ctx):] = torch.tensor(ctx)
        mask[i, width - len(ctx):] = 1
    ids, mask = ids.to(device), mask.to(device)
    eos_ids = _eos_ids(model, tokenizer)
    eos = set(eos_ids.tolist())
    tokens: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float]] = [[] for _ in range(n)]
    why = ["length"] * n
    done = [False] * n
    generated = 0
    was_training = model.training
    model.eval()
    try:
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache, arg = decode_cache(), cache_kwarg(model)
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1, **{arg: cache})
        logits = out.logits[:, -1]
        next_pos = positions[:, -1] + 1
        rows = torch.arange(n, device=device)  # which output row each cache row feeds
        for _ in range(max(budgets)):
            nxt = _sample(logits, temperature, top_p, greedy)
            scaled = logits.float() / temperature
            lp = (scaled.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
                  - torch.logsumexp(scaled, dim=-1)).tolist()
            for j, (r, tok) in enumerate(zip(rows.tolist(), nxt.tolist(), strict=True)):
                if done[r]:
                    continue
                tokens[r].append(tok)
                logprobs[r].append(lp[j])
                generated += 1
                if tok in eos:
                    why[r], done[r] = "eos", True
                    continue
                cut = _call_cut(tokenizer, tool_call_end, tokens[r]) if tool_call_end else None
                if cut is not None:
                    del tokens[r][cut:], logprobs[r][cut:]
                    why[r], done[r] = "tool", True
                elif len(tokens[r]) >= budgets[r]:
                    done[r] = True
            if all(done):
                break
            active = torch.tensor([not done[r] for r in rows.tolist()], device=device)
            logits, rows, mask, next_pos = decode_step(
                model, cache, arg, nxt, active, rows, mask, next_pos, pad_id=pad_id,
                compact_fraction=compact_fraction)
    finally:
        model.train(was_training)
    return tokens, logprobs, why, generated


def run_episodes(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: TaskEnv,
                 tasks: Sequence[Task], prompts: Sequence[str], *, group_size: int,
                 max_new_tokens: int, max_episode_tokens: int = 0, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, workers: int = 16,
                 bridge: ChatBridge | None = None) -> Episodes:
    """``group_size`` episodes per task, to the end; ``prompts`` are the user messages (the
    env's prompts, or perturbed ones), put through the chat template here.

    ``max_new_tokens`` bounds each turn; ``max_episode_tokens`` (0: no bound beyond the turn
    limit) bounds a row's whole completion, observations included. An episode whose turn hits
    a bound is ``truncated``; one whose observation leaves no room for another token is closed
    with an empty final turn (graded as no answer) and marked truncated too.
    """
    bridge = bridge or ChatBridge(tokenizer)
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [chat_prompt(tokenizer, p)
                                                         for p in prompts])
    unpadded = [ids[m.bool()].tolist() for ids, m in zip(prompt_ids, prompt_mask, strict=True)]
    eos = _eos_ids(model, tokenizer).tolist()
    tool_call_end = getattr(env, "tool_call_end", None)
    rows = [_Row(task, i, env.episode(task), [{"role": "user", "content": prompts[i]}])
            for i, task in enumerate(tasks) for _ in range(group_size)]
    generated, gen_s, step_s = 0, 0.0, 0.0
    # The weights are packed once for all the turns (onednn_linear.packed_weights).
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(rows)))) as pool, \
            packed_weights(model):
        def step_all(batch: list[_Row], actions: list[str]) -> None:
            nonlocal step_s
            t0 = time.perf_counter()
            results = list(pool.map(lambda r, a: r.episode.step(a), batch, actions))
            step_s += time.perf_counter() - t0
            for row, (obs, reward, terminated, truncated, info) in zip(batch, results,
                                                                       strict=True):
                row.reward += float(reward)
                if terminated or truncated:
                    row.info, row.truncated = info, row.truncated or bool(truncated)
                    continue
                if row.needs_close:
                    raise RuntimeError(f"{type(env).__name__} did not end an episode on an "
                                       "empty final turn")
                row.transcript.append({"role": bridge.role, "content": str(obs)})
                extra = bridge.tokens(str(obs), row.tokens[-1], eos)
                if max_episode_tokens and len(row.tokens) + len(extra) >= max_episode_tokens:
                    row.needs_close = row.truncated = True  # no room for another turn
                    continue
                row.tokens += extra
                row.action += [0] * len(extra)
                row.logprobs += [0.0] * len(extra)

        live = rows
        while live:
            budgets = [max_new_tokens if not max_episode_tokens else
                       min(max_new_tokens, max_episode_tokens - len(r.tokens)) for r in live]
            t0 = time.perf_counter()
            turns, lps, why, n = generate_turn(
                model, tokenizer, [unpadded[r.prompt] + r.tokens for r in live], budgets,
                tool_call_end=tool_call_end, temperature=temperature, top_p=top_p,
                greedy=greedy)
            gen_s += time.perf_counter() - t0
            generated += n
            actions = []
            for row, toks, lp, stop in zip(live, turns, lps, why, strict=True):
                row.tokens += toks
                row.action += [1] * len(toks)
                row.logprobs += lp
                row.truncated = stop == "length"
                text = tokenizer.decode(toks, skip_special_tokens=True)
                row.transcript.append({"role": "assistant", "content": text})
                actions.append(text)
            step_all(live, actions)
            closing = [r for r in live if r.needs_close and not r.done]
            if closing:
                step_all(closing, [""] * len(closing))
            live = [r for r in live if not r.done]
    return Episodes(_rollout(rows, prompt_ids, prompt_mask, group_size, tokenizer, generated),
                    _scores(rows), [r.logprobs for r in rows], gen_s, step_s)


def _rollout(rows: list[_Row], prompt_ids: Tensor, prompt_mask: Tensor, group_size: int,
             tokenizer: PreTrainedTokenizerBase, generated: int) -> Rollout:
    width = max(len(r.tokens) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    action = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r.tokens)] = torch.tensor(r.tokens)
        mask[i, :len(r.tokens)] = 1
        action[i, :len(r.tokens)] = torch.tensor(r.action)
    return Rollout(
        prompt_ids=prompt_ids.repeat_interleave(group_size, 0),
        prompt_mask=prompt_mask.repeat_interleave(group_size, 0),
        completion_ids=ids, completion_mask=mask, action_mask=action,
        truncated=torch.tensor([r.truncated for r in rows]),
        # What the policy wrote, for the flags and the monitor: its turns, not the tool's.
        texts=["\n\n".join(t["content"] for t in r.transcript if t["role"] == "assistant")
               for r in rows],
        generated_tokens=generated,
        transcripts=[r.transcript for r in rows],
    )


def _scores(rows: list[_Row]) -> Scores:
    infos = [r.info or {} for r in rows]
    return Scores(
        rewards=[r.reward for r in rows],
        components=[dict(info.get("rewards", {})) for info in infos],
        passed=[bool(info.get("passed")) for info in infos],
        infra_error=[is_infra_error(info) for info in infos],
        infos=infos,
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
