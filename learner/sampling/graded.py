"""The one sample-and-score path: ``group_size`` graded completions per task, single-turn or
multi-turn alike. Training (``training.collect``) and held-out evaluation
(``evaluation.heldout``) both draw through ``sample_graded``; only their engines differ.

A single-turn env's completions are generated as one batch, then graded (``score_all``: on a
thread pool, or by a ``RemoteScorer``); a multi-turn env's episodes are graded by the env as
each ends (``run_episodes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from envs.base import answer_rule
from envs.contract import LearnerEnv
from learner.model import chat_prompt
from learner.sampling.chat import ChatBridge
from learner.sampling.engine import SamplingEngine
from learner.sampling.episodes import run_episodes
from learner.sampling.rollout import Rollout, generate
from learner.sampling.scoring import RemoteScorer, Scores, score_all
from tasks import Task


@dataclass
class Graded:
    """A batch of sampled completions with the env's grades, and the seconds spent sampling
    and grading (an episode's grading is the env's steps, tool calls included)."""

    rollout: Rollout
    scores: Scores
    generate_s: float
    score_s: float


def sample_graded(sampler: Callable[[], AbstractContextManager[SamplingEngine]],
                  tokenizer: PreTrainedTokenizerBase, env: LearnerEnv, tasks: Sequence[Task],
                  prompts: Sequence[str], *, group_size: int, max_new_tokens: int,
                  bridge: ChatBridge | None, max_episode_tokens: int = 0,
                  temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                  workers: int = 16, scorer: RemoteScorer | None = None,
                  max_rows: int = 0) -> Graded:
    """``group_size`` completions of each of ``prompts`` (the user messages for ``tasks``, put
    through the chat template here), graded; rows are task-major.

    ``sampler()`` opens the engine for the sampling only: a single-turn batch is graded after
    it closes (under ZeRO-3 the gathered weights are let go before grading). ``bridge`` is set
    for a multi-turn env (``is_multi_turn``), whose episodes run inside the sampler.
    ``max_rows``: a single-turn batch decodes at most that many rows at once (``generate``).
    """
    t0 = time.perf_counter()
    with sampler() as engine:
        if bridge is not None:
            eps = run_episodes(engine, tokenizer, env, tasks, prompts, group_size=group_size,
                               max_new_tokens=max_new_tokens,
                               max_episode_tokens=max_episode_tokens, greedy=greedy,
                               temperature=temperature, top_p=top_p, workers=workers,
                               bridge=bridge)
            return Graded(eps.rollout, eps.scores, eps.generate_s, eps.step_s)
        roll = generate(engine, tokenizer, [chat_prompt(tokenizer, p) for p in prompts],
                        group_size=group_size, max_new_tokens=max_new_tokens, greedy=greedy,
                        temperature=temperature, top_p=top_p, answer_end=answer_rule(env),
                        max_rows=max_rows)
    generate_s, t1 = time.perf_counter() - t0, time.perf_counter()
    scores = score_all(env, [t for t in tasks for _ in range(group_size)], roll.texts,
                       workers, scorer)
    return Graded(roll, scores, generate_s, time.perf_counter() - t1)
