"""A step's samples: generation rounds on this process's share of the prompts (completions, or
whole episodes on a multi-turn env), graded by the env, until the step has its P groups.

With ``--dynamic-sampling`` (DAPO) a step draws more rounds until P groups over all processes
are informative (``--dynamic-sampling-metric``: their verdicts, or their rewards, differ), at
most ``--max-sampling-tries``; otherwise it is one round. A step still short of P then trains on
the informative groups it has (refilling without bound could stall a run whose prompts are all
solved or all hopeless): ``group/short`` logs how many it lacked, and the first such step says
so in one line.

With ``--async-steps 1`` and the learner's own loop, the draw (on the background thread, with the
frozen copy of the policy that sampled) also scores its completions in the trainer's forward
pass: the engine mismatch alone (``rollout/logprob_abs_diff_*``), apart from the policy drift
the update then sees on top of it (``rollout/stale_*``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from accelerate import Accelerator
from transformers import PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from learner.sampling.chat import ChatBridge
from learner.sampling.engine import HFEngine, SamplingEngine, SyncedEngine
from learner.sampling.graded import sample_graded
from learner.sampling.scoring import RemoteScorer
from learner.stage_config import SamplingConfig
from learner.training import grpo, sharding
from learner.training.batching import gather_rows, select_rows
from learner.training.distributed import Processes
from learner.training.forward import completion_logprobs
from learner.training.mismatch import LogprobMismatch
from learner.training.samples import StepSamples
from learner.training.task_sampler import LearnerSampler


class Collector:
    """Samples for the trainer's steps; ``bridge`` is set on a multi-turn env, ``max_tokens``
    is the completion budget L (DAPO's default L_max), and ``engine`` the vLLM engine that
    samples (None: the learner's own loop on the policy)."""

    def __init__(self, config: SamplingConfig, env: LearnerEnv,
                 tokenizer: PreTrainedTokenizerBase, stream: LearnerSampler, procs: Processes,
                 accelerator: Accelerator, *,
                 scorer: RemoteScorer | None, bridge: ChatBridge | None, max_tokens: int,
                 engine: SyncedEngine | None = None):
        self.config, self.env, self.tokenizer, self.stream = config, env, tokenizer, stream
        self.procs, self.accelerator, self.scorer = procs, accelerator, scorer
        self.bridge, self.max_tokens, self.engine = bridge, max_tokens, engine
        self.warned_short = False

    def collect(self, model: Any) -> StepSamples:
        """The step's samples: every round's, together."""
        c = self.config
        rounds: list[StepSamples] = []
        informative = 0
        while True:
            want = c.prompts_per_step - informative if rounds else c.prompts_per_step
            rounds.append(self.round(model, max(want, self.procs.world)))  # a prompt a process
            samples = StepSamples.concat(rounds, self.tokenizer.pad_token_id)
            informative = sum(self.procs.gather_ints(int(samples.informative.sum())))
            if not c.dynamic_sampling or informative >= c.prompts_per_step \
                    or len(rounds) >= c.max_sampling_tries:
                samples.informative_groups = informative
                if c.dynamic_sampling:
                    samples.short = max(c.prompts_per_step - informative, 0)
                    self._say_short(samples.short, len(rounds))
                if c.async_steps and self.engine is None:
                    samples.draw_mismatch = self.draw_mismatch(model, samples)
                return samples

    @torch.no_grad()
    def draw_mismatch(self, model: Any, samples: StepSamples) -> dict[str, float]:
        """The sampling policy's own log-probs of its completions, in the trainer's forward
        pass (micro-batches of --micro-batch-tokens), against the engine's as it sampled: the
        engine mismatch without the drift of the update that follows."""
        c, roll = self.config, samples.rollout
        every = torch.ones(len(roll.texts), dtype=torch.bool, device=samples.device)
        none = torch.zeros(len(every), device=samples.device)  # no advantages: no loss
        rows = select_rows(roll, every, none, mask_truncated=False)
        batch = gather_rows(roll, rows, every, none, samples.groups)
        parts = max(1, batch.parts_for(c.micro_batch_tokens))
        mismatch = LogprobMismatch()
        with self.accelerator.autocast():  # thread-local: as the update's passes run
            for mb in batch.split_by_tokens(min(parts, len(batch))):
                mb = mb.to(samples.device)
                logp, _ = completion_logprobs(model, mb.prompt_ids, mb.prompt_mask,
                                              mb.completion_ids, mb.completion_mask, mb.groups,
                                              temperature=c.temperature, top_p=c.top_p)
                assert mb.sampling_logprobs is not None  # the engine recorded them as it sampled
                mismatch.add(logp, mb.sampling_logprobs, mb.loss_mask)
        return mismatch.metrics(self.procs)

    def _say_short(self, short: int, tries: int) -> None:
        if not short or self.warned_short:
            return
        self.warned_short = True
        if self.procs.rank == 0:
            c = self.config
            print(f"warning: --dynamic-sampling: a step has {c.prompts_per_step - short} of "
                  f"{c.prompts_per_step} informative groups after {tries} rounds "
                  f"(--max-sampling-tries); it trains on those (group/short logs each step's "
                  f"shortfall)", flush=True)

    def round(self, model: Any, n_prompts: int) -> StepSamples:
        """This process's share of ``n_prompts`` prompts, G completions each, sampled, then
        graded (an episode is graded by the env as it ends)."""
        c = self.config
        tasks = self.procs.local(self.stream.take(n_prompts))
        prompts = [self.env.prompt(t) for t in tasks]
        graded = sample_graded(lambda: self.sampler(model), self.tokenizer, self.env, tasks,
                               prompts, group_size=c.group_size, max_new_tokens=c.max_new_tokens,
                               bridge=self.bridge, max_episode_tokens=c.max_episode_tokens,
                               temperature=c.temperature, top_p=c.top_p,
                               workers=c.score_workers, scorer=self.scorer)
        roll, scores = graded.rollout, graded.scores
        shaping = None
        if c.overlong_cache:  # DAPO's soft overlong punishment joins the reward
            shaping = grpo.overlong_penalty(roll.policy_lengths, c.overlong_max or self.max_tokens,
                                            c.overlong_cache)
        return StepSamples(tasks, prompts, roll, scores, c.group_size, shaping,
                           generate_s=graded.generate_s, score_s=graded.score_s,
                           metric=c.dynamic_sampling_metric)

    @contextlib.contextmanager
    def sampler(self, model: Any) -> Iterator[SamplingEngine]:
        """The round's engine: vLLM's (its weights synced after each update), or the learner's
        loop on the policy under bf16 autocast on CUDA (a no-op on CPU), with its full weights
        even under ZeRO-3."""
        if self.engine is not None:
            yield self.engine
            return
        with self.accelerator.autocast(), \
                sharding.full_weights(self.accelerator, model) as policy:
            yield HFEngine(policy)
