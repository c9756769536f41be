"""The GRPO training loop. A step (``train_step``) reads top to bottom: sample and score
(``collect``), advantages (``grpo``), the rows to train on (``batching``), the loss passes and
optimizer steps (``update``), then the reward-hack monitor's counts and the metrics
(``step_metrics``).

It runs unchanged as one process or under ``accelerate launch`` (DDP, DeepSpeed): every process
takes its share of the step's prompts, groups never span processes, gradients are averaged by
the wrapped model, and the few numbers that must be global go through ``distributed``.

With ``--async-steps 1`` (one process) the next step's samples are drawn while a step trains,
by the policy as it was before the step's update (``ahead``); the update is told how stale
they are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import Tensor
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase, get_scheduler

from envs.learner_env import LearnerEnv
from learner.config import INFRA_WINDOW_STEPS, Config
from learner.evaluation.heldout import evaluate, heldout_tasks
from learner.evaluation.infra import InfraCount
from learner.model import chat_prompt, load_model, load_tokenizer, with_lora
from learner.sampling.chat import ChatBridge
from learner.sampling.engine import SyncedEngine, build_engine
from learner.sampling.episodes import is_multi_turn
from learner.sampling.kernels import onednn_linear
from learner.sampling.scoring import RemoteScorer, infra_reason
from learner.training import checkpoint, grpo, hack_monitor, memory_plan, run_notes, sharding
from learner.training.ahead import DrawAhead, Drawn
from learner.training.batching import Batch, gather_rows, select_rows
from learner.training.collect import Collector
from learner.training.data import PromptStream
from learner.training.distributed import (
    Processes,
    check_accumulation,
    cpu_threads,
    make_accelerator,
    share_quota,
)
from learner.training.hack_monitor import HackMonitor, StepFlags, StepShaping
from learner.training.run_log import RunLog
from learner.training.samples import StepSamples
from learner.training.step_metrics import StepTimes, step_metrics
from learner.training.stops import (
    GradingOutage,
    InfraWatch,
    Interrupted,
    RunStopped,
    StopSignals,
)
from learner.training.update import PolicyUpdate, UpdateStats


@dataclass
class Step:
    """What one training step did, as the loop and the run log read it."""

    number: int
    samples: StepSamples
    advantages: Tensor  # (B,) per sample (0 for those whose grading failed)
    batch: Batch | None  # the rows trained on; None when no process had one
    update: UpdateStats
    flags: StepFlags  # the reward-hack monitor's counts, over every process
    shaping: StepShaping
    metrics: dict[str, Any]

    def sample_groups(self, n: int) -> list[dict[str, Any]]:
        """The first ``n`` groups of this process, as ``samples.jsonl`` keeps them."""
        return self.samples.groups_for_log(n, self.advantages)


def adamw(params: list[torch.nn.Parameter], *, fused: bool, **kwargs: Any) -> torch.optim.AdamW:
    """AdamW, fused where torch has the kernel for the parameters' device: one pass over each
    parameter instead of several, 3-5x faster steps on CPU, the same update."""
    if fused:
        try:
            return torch.optim.AdamW(params, fused=True, **kwargs)
        except RuntimeError:  # torch < 2.4 fuses on CUDA only
            pass
    return torch.optim.AdamW(params, **kwargs)


class GRPOTrainer:
    def __init__(self, config: Config, *, model: PreTrainedModel | None = None,
                 tokenizer: PreTrainedTokenizerBase | None = None, env: LearnerEnv | None = None,
                 accelerator: Accelerator | None = None, scorer: RemoteScorer | None = None,
                 engine: SyncedEngine | None = None):
        self.config = c = config
        # A process group that exists already (a vLLM engine's, or the caller's accelerator's)
        # is not the run's to end: ``close`` leaves it to its owner.
        self._group_is_ours = not (torch.distributed.is_available()
                                   and torch.distributed.is_initialized())
        self.accelerator = accelerator or make_accelerator()
        check_accumulation(self.accelerator)
        self.procs = Processes(self.accelerator)
        sharding.check_supported(self.accelerator, lora=c.lora_r > 0)
        sharding.configure_deepspeed(self.accelerator, c.max_grad_norm)
        if c.num_threads or self.accelerator.device.type == "cpu":
            torch.set_num_threads(c.num_threads or cpu_threads(self.procs.world))
        set_seed(c.seed, device_specific=True)  # each process samples differently
        self.env = env or gym.make(c.env, **c.env_options()).unwrapped
        if scorer is None and c.ray_address:  # --ray-address: grade on the cluster
            from envs.ray_scoring import RayScorer

            scorer = RayScorer(self.env, c.ray_address)
        self.scorer = scorer
        self.tokenizer = tokenizer or load_tokenizer(c.model)
        # Multi-turn envs: episodes of several policy turns with tool outputs in between.
        self.bridge = ChatBridge(self.tokenizer, c.tool_role) if is_multi_turn(self.env) else None
        # L, the most policy tokens a completion holds: Dr. GRPO's constant, DAPO's L_max.
        self.max_tokens = grpo.dr_grpo_max_tokens(
            c.max_new_tokens, int(self.env.max_turns) if self.bridge else 1, c.max_episode_tokens)
        if c.overlong_cache > (c.overlong_max or self.max_tokens):
            raise ValueError(f"--overlong-cache {c.overlong_cache} exceeds L_max "
                             f"{c.overlong_max or self.max_tokens}")
        self.update = self._prepare(model or load_model(c.model))
        if c.async_steps and (self.procs.world > 1 or self.update.deepspeed):
            raise sharding.UnsupportedBackend(
                "--async-steps 1 runs in one process without DeepSpeed: the background draw's "
                "collectives would interleave with the update's")
        # --rollout-engine vllm: an engine with its own weights, synced after every update
        # (None: the learner's own loop samples from the policy itself).
        self.engine = engine if engine is not None else build_engine(
            c, self.accelerator.device, rank=self.procs.rank, processes=self.procs.world)
        self._owns_engine = engine is None  # one passed in (a test's shared engine) stays open
        self._synced_version = -1  # the policy version the engine holds
        self.sync_engine()
        self.stream = PromptStream(self.env, "train", seed=c.seed)
        self.collector = Collector(c, self.env, self.tokenizer, self.stream, self.procs,
                                   self.accelerator, scorer=scorer, bridge=self.bridge,
                                   max_tokens=self.max_tokens, engine=self.engine)
        # --async-steps 1: the next step's samples, drawn while this one trains.
        self.ahead = DrawAhead(self.collector.collect) if c.async_steps else None
        self.step = 0
        # --max-infra-error-rate: the last steps' infrastructure failures (a resumed run's
        # window starts afresh).
        self.infra_watch = InfraWatch(c.max_infra_error_rate, INFRA_WINDOW_STEPS)
        self.memory_plan = self._check_memory()

    def _check_memory(self) -> memory_plan.MemoryPlan:
        """The run's estimated peak memory; one line before the first step when it is over what
        the machine (or the GPU) has available, so that the kernel does not kill the run."""
        c = self.config
        policy = self.policy
        params = list(policy.parameters())
        size = self.env.pack.size("train")  # None: a procedural pack's unbounded stream
        prompts = [self.env.prompt(self.env.pack.task_at("train", i))
                   for i in range(16 if size is None else min(16, size))]
        widest = max((len(self.tokenizer(chat_prompt(self.tokenizer, p))["input_ids"])
                      for p in prompts), default=0)
        plan = memory_plan.estimate(
            policy.config, trainable=sum(p.numel() for p in params if p.requires_grad),
            total=sum(p.numel() for p in params), reference=self.ref_model is not None,
            rows=c.prompts_per_step * c.group_size // self.procs.world,
            context=widest + self.max_tokens, micro_batch_tokens=c.micro_batch_tokens)
        if self.accelerator.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info()
            available = free + memory_plan.BASE_BYTES  # the host's share is not on the GPU
        else:
            import psutil

            # What is free plus what this process holds already (the plan counts it).
            available = (psutil.virtual_memory().available
                         + psutil.Process().memory_info().rss) / self.procs.world
        line = memory_plan.warning(plan, available, c.micro_batch_tokens)
        if line and self.accelerator.is_main_process:
            print(f"warning: {line}", flush=True)
        return plan

    def _prepare(self, model: PreTrainedModel) -> PolicyUpdate:
        """The policy (LoRA-wrapped when asked), its frozen reference, optimizer and schedule,
        prepared for the processes, with their Linear layers on the CPU kernel asked for."""
        c = self.config
        if c.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            model.config.use_cache = True  # generation still uses the KV cache (eval mode)
        ref_model = None
        if c.lora_r:
            model = with_lora(model, c.lora_r, c.lora_alpha, c.lora_dropout)
        elif c.beta > 0:
            # A frozen copy of the initial policy (with LoRA, the base model with adapters off).
            ref_model = sharding.reference_copy(model, c.model).eval().requires_grad_(False)
        deepspeed = sharding.uses_deepspeed(self.accelerator)
        optimizer = adamw([p for p in model.parameters() if p.requires_grad],
                          fused=not deepspeed, lr=c.learning_rate,
                          betas=(c.adam_beta1, c.adam_beta2), weight_decay=c.weight_decay)
        scheduler = get_scheduler(
            c.lr_scheduler, optimizer, num_warmup_steps=c.warmup_steps * c.num_iterations,
            num_training_steps=c.steps * c.num_iterations)
        model, optimizer, scheduler = self.accelerator.prepare(model, optimizer, scheduler)
        if ref_model is not None:
            ref_model = sharding.prepare_reference(self.accelerator, ref_model)
        if not deepspeed:  # ZeRO-3 wraps the Linear layers' products itself
            for m in (model, ref_model):
                if m is not None:
                    onednn_linear.route_on_cpu(m, c.cpu_matmul)
        return PolicyUpdate(c, self.accelerator, self.procs, model, ref_model, optimizer,
                            scheduler, max_tokens=self.max_tokens, deepspeed=deepspeed)

    # -- what the update owns, under the names the trainer has always had --------------------
    @property
    def model(self) -> Any:
        return self.update.model

    @property
    def ref_model(self) -> Any:
        return self.update.ref_model

    @property
    def optimizer(self) -> Any:
        return self.update.optimizer

    @property
    def scheduler(self) -> Any:
        return self.update.scheduler

    @property
    def policy(self) -> PreTrainedModel:
        return self.accelerator.unwrap_model(self.model)

    @property
    def policy_is_reference(self) -> bool:
        """Until the first optimizer step the policy is the reference (see ``update``)."""
        return self.update.policy_is_reference

    @policy_is_reference.setter
    def policy_is_reference(self, value: bool) -> None:
        self.update.policy_is_reference = value

    # -- one step ---------------------------------------------------------------------------
    def train_step(self) -> Step:
        start = time.perf_counter()
        drawn = self.ahead.take() if self.ahead is not None else None  # drawn during the last step
        wait_s = time.perf_counter() - start
        if drawn is None:
            drawn = Drawn(self.collect(), self.update.version)  # sample -> score
        samples = drawn.samples
        sync_s = None
        if self.ahead is not None and self.step + 1 < self.config.steps:
            sync_s = self.draw_ahead()  # the next step's, with the weights before this update
        staleness = self.update.version - drawn.version  # optimizer steps since the draw
        advantages = self.advantages(samples)
        batch = self.batch(samples, advantages)
        t0 = time.perf_counter()
        # The loss passes and optimizer steps (none when no process has a row to train on).
        stats = self.update(batch, staleness) if batch is not None else self.update.skip()
        train_s = time.perf_counter() - t0
        if self.ahead is None:
            t1 = time.perf_counter()
            if not stats.skipped and stats.nonfinite_skipped < self.config.num_iterations:
                self.sync_engine()  # the policy moved: the engine samples the next step with it
            sync_s = time.perf_counter() - t1
        self.step += 1
        flags, shaping = self.monitor_counts(samples)
        metrics = step_metrics(samples, batch, stats, flags, shaping,
                               StepTimes(time.perf_counter() - start, train_s),
                               lr=self.scheduler.get_last_lr()[0], procs=self.procs)
        if self.engine is not None and sync_s is not None:
            metrics["time/engine_sync_s"] = sync_s
        if self.ahead is not None:
            metrics["rollout/staleness"] = staleness
            metrics["time/sample_wait_s"] = wait_s  # 0 when the draw kept up with training
        return Step(self.step, samples, advantages, batch, stats, flags, shaping, metrics)

    def draw_ahead(self) -> float | None:
        """Start drawing the next step's samples with the policy's weights now; returns how
        long syncing the engine took (None: nothing to sync). A vLLM engine is synced here, one
        step late: its last draw is done, and the update that follows reaches it next time."""
        sync_s = None
        if self.engine is not None:
            model = self.model  # the engine samples with its own weights
            if self._synced_version != self.update.version:
                t0 = time.perf_counter()
                self.sync_engine()
                sync_s = time.perf_counter() - t0
        else:
            model = self.ahead.frozen_copy(self.policy)
        self.ahead.start(model, self.update.version, self.stream.position)
        return sync_s

    def collect(self) -> StepSamples:
        """Generate and score until the step has its P groups (``collect``)."""
        return self.collector.collect(self.model)

    def advantages(self, samples: StepSamples) -> Tensor:
        """(B,) group-relative advantages of the graded samples; 0 for the others."""
        c = self.config
        graded, rewards = samples.graded, samples.rewards
        batch_std = None
        if c.reward_scaling == "batch" and self.procs.world > 1:
            # A collective: every process takes part, also one whose samples all failed.
            batch_std = self.procs.std(rewards[graded].tolist())
        adv = torch.zeros(len(rewards))
        if graded.any():
            adv[graded] = grpo.group_advantages(rewards[graded], samples.groups[graded],
                                                samples.moments, c.reward_scaling,
                                                batch_std=batch_std)
        return adv

    def batch(self, samples: StepSamples, advantages: Tensor) -> Batch | None:
        """The rows the step computes; None when no process has one (nothing to learn).

        A zero-advantage row adds nothing but its KL term, which is exactly 0, gradient
        included, while the policy is the reference: then it is left out, as always with
        beta 0, unless later iterations of the step (``--num-iterations``) will need it.
        """
        c = self.config
        in_step = samples.graded
        if c.dynamic_sampling:  # DAPO: the step trains the first P groups with reward spread
            informative = samples.informative.nonzero().squeeze(-1)
            quota = share_quota(self.procs.gather_ints(len(informative)), c.prompts_per_step)
            in_step = in_step & torch.isin(samples.groups, informative[:quota[self.procs.rank]])
        rows = select_rows(samples.rollout, in_step, advantages, mask_truncated=c.mask_truncated)
        kl_counts = c.beta > 0 and not self.policy_is_reference
        needed = rows.loss_rows if kl_counts else rows.learning_rows
        if sum(self.procs.gather_ints(int(needed.sum()))) == 0:
            return None
        keep = rows.loss_rows if c.beta > 0 and (kl_counts or c.num_iterations > 1) \
            else rows.learning_rows
        return gather_rows(samples.rollout, rows, keep, advantages, samples.groups)

    def monitor_counts(self, samples: StepSamples) -> tuple[StepFlags, StepShaping]:
        """The env's flags over the step's credited samples, and the samples paid by shaping
        terms alone (``hack_monitor``), summed over processes."""
        g, roll, scores = self.config.group_size, samples.rollout, samples.scores
        flags = hack_monitor.flag_credited(self.env, [t for t in samples.tasks for _ in range(g)],
                                           roll.texts, scores.infos, roll.truncated.tolist())
        shaping = hack_monitor.shaping_only(self.env, scores.components, scores.passed,
                                            samples.graded.tolist())
        return (StepFlags.merge(self.procs.gather_objects(flags)),
                StepShaping.merge(self.procs.gather_objects(shaping)))

    # -- evaluation, checkpoints, the loop --------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        c = self.config
        tasks = self.procs.local(heldout_tasks(self.env, c.eval_size))
        gather = None
        if self.procs.world > 1:
            from accelerate.utils import gather_object as gather
        # One gathering of the full weights (ZeRO-3) serves every generation pass below.
        with sharding.full_weights(self.accelerator, self.model) as policy:
            result = evaluate(policy, self.tokenizer, self.env, tasks,
                              max_new_tokens=c.max_new_tokens, k=c.eval_k,
                              temperature=c.temperature, top_p=c.top_p,
                              batch_size=c.eval_batch_size, workers=c.score_workers,
                              scorer=self.scorer, max_episode_tokens=c.max_episode_tokens,
                              tool_role=c.tool_role)
            if gather is not None:
                result.records = gather(result.records)
            self.heldout_records = result.records  # heldout.jsonl: what the accuracy counted
            metrics = {f"eval/{k}": v for k, v in result.metrics().items()}
            if c.eval_perturbations:
                from learner.evaluation.gates import perturbation_metrics

                subset = tasks[:c.eval_perturb_size] if c.eval_perturb_size else tasks
                metrics.update(perturbation_metrics(
                    policy, self.tokenizer, self.env, subset, max_new_tokens=c.max_new_tokens,
                    batch_size=c.eval_batch_size, workers=c.score_workers,
                    scorer=self.scorer, gather=gather))
        return metrics

    def save(self) -> None:
        # A draw in flight holds the next step's prompts: a resumed run draws them again.
        pending = self.ahead is not None and self.ahead.pending
        position = self.ahead.position if pending else self.stream.position
        checkpoint.save(self.accelerator, self.config.output_dir, self.step,
                        {"position": position}, keep=self.config.keep_checkpoints)
        self._saved_step = self.step

    def resume(self) -> bool:
        path = checkpoint.latest(self.config.output_dir)
        if path is None:
            return False
        state = checkpoint.load(self.accelerator, path)
        self.step, self.stream.position = state["step"], state["position"]
        self.policy_is_reference = self.step == 0
        self.sync_engine()
        self._saved_step = self.step
        if self.accelerator.is_main_process:
            print(f"resumed from step {self.step} of {self.config.steps} "
                  f"({path.relative_to(self.config.output_dir)})", flush=True)
        return True

    def sync_engine(self) -> None:
        """Load the policy's current weights into the sampling engine (vllm; hf samples from
        the policy itself), gathered in full under ZeRO-3."""
        if self.engine is not None:
            with sharding.full_weights(self.accelerator, self.model) as policy:
                self.engine.sync(policy)
            self._synced_version = self.update.version

    #: Whether ``train`` checkpoints the last step. The command line turns it off unless
    #: --keep-final-checkpoint: a finished run's final/ holds its weights.
    save_at_end: bool = True
    _saved_step: int | None = None

    def train(self) -> dict[str, Any]:
        """Run to ``config.steps``; returns held-out metrics before (if run) and after, the
        last step's metrics and the reward-hack monitor's total.

        Raises ``RunStopped`` with a checkpoint saved when the run cannot or must not go on:
        ``Interrupted`` on SIGINT/SIGTERM (after the step in progress), ``GradingOutage``
        when samples failed because the grading engine or cluster as a whole does not answer.
        """
        c = self.config
        resumed = c.resume and self.resume()
        main = self.accelerator.is_main_process
        if main:
            print(run_notes.plan_line(c, self.env, self.step), flush=True)
        log = RunLog(c.output_dir, resume_step=self.step if resumed else None) if main else None
        result: dict[str, Any] = {"resumed_from": self.step if resumed else None}
        with StopSignals() as signals:
            try:
                if c.eval and not resumed:
                    result["before"] = self.evaluate()
                    self._say_if_refused(0, result["before"])
                    if log:
                        log.log(0, result["before"])
                        log.heldout(0, self.heldout_records)
                result.update(self._loop(log, signals))
            finally:
                if log:
                    log.close()
        return result

    def _loop(self, log: RunLog | None, signals: StopSignals) -> dict[str, Any]:
        c = self.config
        main = self.accelerator.is_main_process
        result: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        bar = tqdm(total=c.steps, initial=self.step, disable=not (main and c.progress),
                   desc="grpo", dynamic_ncols=True, bar_format=run_notes.BAR_FORMAT)
        monitor, infra_warned = HackMonitor(), False
        watch = run_notes.NoSignalWatch(self.env.no_signal_hint())
        first, last_save = True, time.monotonic()
        try:
            while self.step < c.steps:
                self._stop_if_asked(signals)
                t0 = time.perf_counter()
                step = self.train_step()
                metrics = step.metrics
                stop = self._stop_after(step, signals)
                if main and first:
                    first = False
                    tqdm.write(run_notes.estimate_line(time.perf_counter() - t0,
                                                       c.steps - self.step, c.eval))
                if watch.watching:
                    line = watch.observe(sum(self.procs.gather_ints(
                        int(step.samples.informative.sum()))))
                    if line and main:
                        tqdm.write(line)
                for warning in (monitor.observe(step.number, step.flags),
                                monitor.observe_shaping(step.number, step.shaping)):
                    if warning and main:
                        tqdm.write(f"warning: {warning}")
                if (metrics["samples/infra_errors"] and not infra_warned and main
                        and stop is None):
                    # Once: a sandbox that fails some samples may fail many.
                    infra_warned = True
                    tqdm.write(f"warning: {self._infra_notice(step)}")
                if stop is None:  # a stopping run evaluates nothing more
                    if (c.eval and c.eval_every and self.step % c.eval_every == 0
                            and self.step < c.steps):
                        metrics.update(self.evaluate())
                    if c.eval and self.step == c.steps:
                        result["after"] = self.evaluate()
                        metrics.update(result["after"])
                    self._say_if_refused(self.step, metrics)
                if log:
                    log.log(self.step, metrics)
                    if "eval/accuracy" in metrics:  # evaluated at this step
                        log.heldout(self.step, self.heldout_records)
                    # The last step's groups too: a run shorter than K steps still leaves some.
                    if c.samples_every and (self.step % c.samples_every == 0
                                            or self.step == c.steps):
                        log.samples(self.step, step.sample_groups(c.samples_groups))
                if stop is not None:
                    self.save()
                    raise stop
                if ((c.save_every and self.step % c.save_every == 0)
                        or (self.step == c.steps and self.save_at_end)
                        or (self.step < c.steps and self._save_due(last_save))):
                    self.save()
                    last_save = time.monotonic()
                bar.set_postfix(step=self.step, **_progress(metrics), refresh=False)
                bar.update(1)
        finally:
            bar.close()
        result["final_metrics"] = metrics
        result["flags"] = monitor.total
        return result

    def _save_due(self, last_save: float) -> bool:
        """--save-every-minutes: due once that much wall time passed since the last save; rank
        0's clock decides for every process (they must save together)."""
        minutes = self.config.save_every_minutes
        if not minutes:
            return False
        due = time.monotonic() - last_save >= minutes * 60
        return bool(self.procs.gather_ints(int(due))[0])

    def _stop_if_asked(self, signals: StopSignals) -> None:
        """Before a step: a signal that came meanwhile (during an evaluation, say) stops the
        run here, with a checkpoint of the steps done."""
        signum = max(self.procs.gather_ints(signals.requested or 0))
        if signum:
            if self._saved_step != self.step:
                self.save()
            raise Interrupted(signum, self.step, self.config.steps)

    def _stop_after(self, step: Step, signals: StopSignals) -> RunStopped | None:
        """Why the run stops after ``step`` (None: it goes on), agreed by every process: a
        signal, samples that failed because grading as a whole is down, or more than
        ``--max-infra-error-rate`` of the last steps' samples failed for infrastructure
        (``InfraWatch``). A few lost containers are not a reason: their samples are dropped
        from the update and counted in ``samples/infra_errors``."""
        failed = step.metrics["samples/infra_errors"]  # over every process
        outage = self.grading_outage() if failed else None
        outages = [o for o in self.procs.gather_objects(outage) if o]
        if outages:
            return GradingOutage(outages[0], step.number, self.config.steps)
        scores = step.samples.scores
        reasons = self.procs.gather_objects(infra_reason(scores)) if failed else []
        too_many = self.infra_watch.observe(
            step.number, failed, sum(self.procs.gather_ints(len(scores.rewards))),
            next((r for r in reasons if r), None), self.config.steps)
        if too_many is not None:
            return too_many
        signum = max(self.procs.gather_ints(signals.requested or 0))
        return Interrupted(signum, step.number, self.config.steps) if signum else None

    def grading_outage(self) -> str | None:
        """Why grading as a whole does not answer (one line), or None: the Ray cluster's with
        --ray-address, else the env's own infrastructure (``TaskEnv.infra_outage``)."""
        if self.scorer is not None:
            check = getattr(self.scorer, "unreachable", None)
            return check() if check is not None else None
        return self.env.infra_outage()

    def _infra_notice(self, step: Step) -> str:
        n = len(step.samples.scores.rewards) * self.procs.world
        errors = step.metrics["samples/infra_errors"]
        reason = infra_reason(step.samples.scores) or "on another process"
        return (f"step {step.number}: {errors} of {n} samples were not scored because the "
                f"sandbox failed ({reason}). They are dropped from the update and counted in "
                "samples/infra_errors; past --max-infra-error-rate "
                f"{self.config.max_infra_error_rate:g} of the last {INFRA_WINDOW_STEPS} steps' "
                "samples the run stops.")

    def _say_if_refused(self, step: int, metrics: dict[str, Any]) -> None:
        """One line when an evaluation at ``step`` reported no accuracy: more than 1% of its
        samples failed for infrastructure (metrics.jsonl holds ``eval/accuracy: null``)."""
        if not self.accelerator.is_main_process or "eval/n" not in metrics \
                or metrics.get("eval/accuracy") is not None:
            return
        count = InfraCount(int(metrics["eval/n"]), int(metrics.get("eval/infra_errors") or 0),
                           metrics.get("eval/infra_reason"))
        line = count.refusal("held-out accuracy") or "no held-out accuracy: nothing evaluated"
        tqdm.write(f"warning: held-out evaluation at step {step}: {line}")

    def close(self) -> None:
        """End the run's process group, every process together. A process that simply exits
        while the others still hold the group can abort in the group's C++ teardown (SIGABRT,
        "terminate called without an active exception"), failing a run that has finished."""
        self.accelerator.wait_for_everyone()  # no-op for a single process
        if self.ahead is not None:
            self.ahead.close()  # before the engine it may be sampling with
        if self.engine is not None and self._owns_engine:
            self.engine.close()
        if self._group_is_ours:
            self.accelerator.end_training()

    def save_model(self, path: str | Path) -> None:
        """Save the trained policy (merged with LoRA adapters) and tokenizer for later use."""
        self.accelerator.wait_for_everyone()
        state_dict = sharding.full_state_dict(self.accelerator, self.model)
        if self.accelerator.is_main_process:
            model = self.policy
            if self.config.lora_r:
                model = model.merge_and_unload()
            model.save_pretrained(path, state_dict=state_dict)
            self.tokenizer.save_pretrained(path)


def _progress(metrics: dict[str, Any]) -> dict[str, str]:
    """The progress bar's figures: reward, KL ("skipped" on a step without an update), the
    flagged share of credited samples, the peak memory (when step_metrics logs it), grading's
    p99 per sample (and how many samples hit a
    time limit, when any did: a slow verifier shows before it stalls the run)."""
    flagged, kl = metrics.get("flags/credited_frac"), metrics.get("kl")
    out = {"reward": f"{metrics['reward/mean']:.3f}",
           "kl": "skipped" if metrics.get("skipped") else "-" if kl is None else f"{kl:.4f}",
           "flagged": "-" if flagged is None else f"{flagged:.0%}"}
    if (rss := metrics.get("memory/peak_rss_gb")) is not None:
        out["mem"] = f"{rss:.1f}G"
    if (p99 := metrics.get("time/grade_p99_s")) is not None:
        timeouts = metrics.get("samples/grade_timeouts") or 0
        out["grade_p99"] = f"{p99:.2f}s" + (f" ({timeouts} timed out)" if timeouts else "")
    return out
