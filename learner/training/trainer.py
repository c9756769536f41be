"""The GRPO trainer: what a run holds (policy, env, engine, prompt stream) and its step. A step
(``train_step``) reads top to bottom: sample and score (``collect``), advantages (``grpo``), the
rows to train on (``batching``), the loss passes and optimizer steps (``update``), then the
reward-hack monitor's counts and the metrics (``step_metrics``). ``train`` runs the steps
through ``loop.TrainLoop`` (evaluations, logs, checkpoints, warnings, stops).

It runs unchanged as one process or under ``accelerate launch`` (DDP, DeepSpeed): every process
takes its share of the step's prompts, groups never span processes, gradients are averaged by
the wrapped model, and the few numbers that must be global go through ``distributed``.

With ``--async-steps 1`` (one process) the next step's samples are drawn while a step trains,
by the policy as it was before the step's update (``ahead``); the update is told how stale
they are.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from learner import checkpoint_bound, run_layout
from learner.choices import Autocast
from learner.config import INFRA_WINDOW_STEPS, Config, field_default
from learner.env_setup import make_env, ray_scorer
from learner.evaluation.during_training import HeldOut, heldout_metrics
from learner.evaluation.heldout import heldout_tasks
from learner.model import load_model, load_tokenizer
from learner.sampling.chat import ChatBridge
from learner.sampling.engine import SyncedEngine, build_engine, engine_name
from learner.sampling.episodes import is_multi_turn
from learner.sampling.scoring import RemoteScorer
from learner.stage_config import (
    CheckpointConfig,
    EngineConfig,
    EvalConfig,
    SamplingConfig,
    UpdateConfig,
)
from learner.training import (
    checkpoint,
    grpo,
    hack_monitor,
    memory_plan,
    placement,
    sharding,
    vllm_sizing,
)
from learner.training.ahead import DrawAhead, Drawn
from learner.training.batching import Batch, gather_rows, select_rows
from learner.training.collect import Collector
from learner.training.distributed import (
    Processes,
    balance_rows,
    check_accumulation,
    check_shared_folder,
    cpu_threads,
    share_quota,
)
from learner.training.loop import Step, TrainLoop
from learner.training.policy_setup import adopt_flags, enable_checkpointing, prepare_policy
from learner.training.samples import StepSamples
from learner.training.step_metrics import StepTimes, infra_errors, step_metrics
from learner.training.stops import InfraWatch, out_of_memory_as
from learner.training.task_sampler import build_sampler, step_update
from learner.training.update import PolicyUpdate


class GRPOTrainer:
    def __init__(self, config: Config, *, model: PreTrainedModel | None = None,
                 tokenizer: PreTrainedTokenizerBase | None = None, env: LearnerEnv | None = None,
                 accelerator: Accelerator | None = None, scorer: RemoteScorer | None = None,
                 engine: SyncedEngine | None = None, save_at_end: bool = True):
        self.config = c = config
        #: Whether ``train`` checkpoints the last step. The command line passes
        #: --keep-final-checkpoint: a finished run's final/ holds its weights.
        self.save_at_end = save_at_end
        # A process group that exists already (a vLLM engine's, or the caller's accelerator's)
        # is not the run's to end: ``close`` leaves it to its owner.
        self._group_is_ours = not (torch.distributed.is_available()
                                   and torch.distributed.is_initialized())
        # The one place the run's device is decided (--device): every tensor of a step is
        # created there (the rollout, and the masks and advantages made from it).
        where = placement.run_device(c.device, accelerator, c.autocast, timeout_s=c.dist_timeout)
        self.accelerator, self.device = where.accelerator, where.device
        # auto resolved, as config.json records it (the property gives "bf16" or "off")
        c.autocast = cast(Autocast, where.autocast)
        check_accumulation(self.accelerator)
        self.procs = Processes(self.accelerator)
        check_shared_folder(self.procs, c.output_dir)  # checkpoints need one folder for all
        sharding.check_supported(self.accelerator, lora=c.lora_r > 0)
        sharding.configure_deepspeed(self.accelerator, c.max_grad_norm)
        if where.computes_on_cpu and not c.num_threads:
            # Fixed for the whole run and recorded (config.json): one seed, one result.
            c.num_threads = cpu_threads(self.procs.world)
        if c.num_threads:
            torch.set_num_threads(c.num_threads)
        set_seed(c.seed, device_specific=True)  # each process samples differently
        # Built where the command line builds them (``env_setup``) when not passed in.
        self.env = env if env is not None else make_env(c)
        self.scorer = scorer if scorer is not None else ray_scorer(self.env, c.ray_address)
        self.tokenizer = tokenizer or load_tokenizer(c.model)
        # Multi-turn envs: episodes of several policy turns with tool outputs in between.
        self.bridge = ChatBridge(self.tokenizer, c.tool_role) if is_multi_turn(self.env) else None
        # L, the most policy tokens a completion holds: Dr. GRPO's constant, DAPO's L_max.
        self.max_tokens = grpo.dr_grpo_max_tokens(
            c.max_new_tokens, int(self.env.max_turns) if self.bridge else 1, c.max_episode_tokens)
        if c.overlong_cache > (c.overlong_max or self.max_tokens):
            raise ValueError(f"--overlong-cache {c.overlong_cache} exceeds L_max "
                             f"{c.overlong_max or self.max_tokens}")
        model = model or load_model(c.model)
        if where.place:  # a device accelerate does not place models on (lazy, ...)
            model = placement.moved(model, self.device)
        self.update: PolicyUpdate = prepare_policy(
            UpdateConfig.of(c), self.accelerator, self.procs, model, self.max_tokens,
            device=self.device)
        # auto resolved where it is fixed (config.json records it); with flash attention it
        # stays auto: each update packs when that runs fewer positions.
        packing = self.update.packing
        c.packing = "auto" if packing is None else "on" if packing else "off"
        if c.async_steps and (self.procs.world > 1 or self.update.deepspeed):
            raise sharding.UnsupportedBackend(
                "--async-steps 1 runs in one process without DeepSpeed: the background draw's "
                "collectives would interleave with the update's")
        # --rollout-engine vllm: an engine with its own weights, synced after every update
        # (None: the learner's own loop samples from the policy itself), sized from the step.
        self.engine_size = None
        if engine is None and engine_name(c.rollout_engine, self.device) == "vllm":
            self.engine_size = self.size_engine()
        elif engine is None and self.accelerator.is_main_process:
            # The --vllm-* flags are the engine's alone.
            set_ = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(Config)
                    if f.name.startswith("vllm_") and getattr(c, f.name) != field_default(f.name)]
            if set_:
                print(f"note: {', '.join(set_)} shape the vLLM engine, and this run samples "
                      f"with the learner's own loop (--rollout-engine {c.rollout_engine} on "
                      f"{self.device.type}): ignored", flush=True)
        self.engine = engine if engine is not None else build_engine(
            EngineConfig.of(c), self.device, rank=self.procs.rank, processes=self.procs.world,
            size=self.engine_size)
        self._owns_engine = engine is None  # one passed in (a test's shared engine) stays open
        if self.engine is not None:
            # Only a draw on a background thread needs a seed per request (vllm_engine).
            self.engine.seed_requests = bool(c.async_steps)
        self._synced_version = -1  # the policy version the engine holds
        self.sync_engine()
        # --sampler: which train tasks each step draws (``task_sampler``); ``stream`` is its
        # seeded order of the train split.
        self.sampler = build_sampler(c.sampler, self.env, c.seed, c.group_size)
        self.stream = self.sampler.stream
        self.collector = Collector(SamplingConfig.of(c), self.env, self.tokenizer, self.sampler,
                                   self.procs, self.accelerator, scorer=self.scorer,
                                   bridge=self.bridge, max_tokens=self.max_tokens,
                                   engine=self.engine)
        # The loop's evaluations and checkpoints, each with its part of the config.
        self.evaluation = EvalConfig.of(c)
        self.checkpoints = CheckpointConfig.of(c)
        # --async-steps 1: the next step's samples, drawn while this one trains.
        self.ahead = DrawAhead(self.collector.collect) if c.async_steps else None
        self.step = 0
        # --max-infra-error-rate: the last steps' infrastructure failures (a resumed run's
        # window starts afresh).
        self.infra_watch = InfraWatch(c.max_infra_error_rate, INFRA_WINDOW_STEPS)
        self.saved_step: int | None = None  # the last checkpoint's step
        self.memory_plan = memory_plan.check(
            c, self.env, self.tokenizer, self.policy, reference=self.update.ref_model is not None,
            world=self.procs.world, max_tokens=self.max_tokens,
            device=self.device, main=self.accelerator.is_main_process,
            autocast=c.autocast == "bf16")
        turn_on = self.memory_plan.checkpointing and not c.gradient_checkpointing
        # Every process alike (the plans of processes sharing a host may differ).
        if self.procs.world > 1:
            turn_on = any(self.procs.gather_ints(int(turn_on)))
        if turn_on:
            # The plan fits only so (its line said it): on for the run, as config.json records.
            enable_checkpointing(self.policy)
            c.gradient_checkpointing = True
            self.update.config = dataclasses.replace(self.update.config,
                                                     gradient_checkpointing=True)

    def size_engine(self) -> vllm_sizing.EngineSize:
        """The vLLM engine's max_model_len, max_num_seqs and GPU share, derived from the step
        where the flags leave them at 0 (one line says what; config.json records it)."""
        c, policy = self.config, self.policy
        card = (torch.cuda.get_device_properties(self.device).total_memory
                if self.device.type == "cuda" else 0)
        size = vllm_sizing.size_engine(
            EngineConfig.of(c), policy.config,
            params=sum(int(getattr(p, "ds_numel", p.numel())) for p in policy.parameters()),
            prompt_tokens=vllm_sizing.longest_prompt(self.env, self.tokenizer),
            completion_tokens=self.max_tokens, world=self.procs.world,
            multi_turn=self.bridge is not None, card_bytes=card)
        if self.accelerator.is_main_process:
            print(size.line(), flush=True)
        return size

    @property
    def policy(self) -> PreTrainedModel:
        """The policy without its process wrapper (DDP), as generation and saving take it."""
        return self.accelerator.unwrap_model(self.update.model)

    # -- one step ---------------------------------------------------------------------------
    def train_step(self) -> Step:
        c = self.config
        start = time.perf_counter()
        with out_of_memory_as("sampling", f"--prompts-per-step {max(1, c.prompts_per_step // 2)}"
                              " (fewer rows sampled at once)", self.step, c.steps):
            # drawn during the last step
            drawn = self.ahead.take() if self.ahead is not None else None
            wait_s = time.perf_counter() - start
            if drawn is None:
                drawn = Drawn(self.collect(), self.update.version)  # sample -> score
                if self.engine is not None and self.ahead is None:
                    self.engine.sleep()  # the update has the card (a no-op unless colocated)
            samples = drawn.samples
            # Before the next draw starts: it draws with what this step's episodes taught.
            mix = self.update_sampler(samples)
            sync_s = None
            if self.ahead is not None and self.step + 1 < c.steps:
                sync_s = self.draw_ahead()  # the next step's, with the weights before the update
        staleness = self.update.version - drawn.version  # optimizer steps since the draw
        advantages = self.advantages(samples)
        batch = self.batch(samples, advantages)
        if batch is not None:  # whole groups, even in tokens over the processes
            batch = balance_rows(batch, self.procs)
        t0 = time.perf_counter()
        # The loss passes and optimizer steps (none when no process has a row to train on).
        with out_of_memory_as("training", f"--micro-batch-tokens "
                              f"{max(64, (c.micro_batch_tokens or 1024) // 2)} (or "
                              "--gradient-checkpointing)", self.step, c.steps):
            stats = self.update(batch, staleness) if batch is not None else self.update.skip()
        train_s = time.perf_counter() - t0
        if self.ahead is None:
            t1 = time.perf_counter()
            if not stats.skipped and stats.nonfinite_skipped < self.config.num_iterations:
                self.sync_engine()  # the policy moved: the engine samples the next step with it
            sync_s = time.perf_counter() - t1
        self.step += 1
        flags, shaping = hack_monitor.step_counts(self.env, samples, self.config.group_size,
                                                  self.procs)
        failed = infra_errors(samples, self.procs)
        metrics = step_metrics(samples, batch, stats, flags, shaping,
                               StepTimes(time.perf_counter() - start, train_s),
                               lr=self.update.scheduler.get_last_lr()[0], procs=self.procs,
                               infra_errors=failed)
        metrics.update(mix)
        if self.engine is not None and sync_s is not None:
            metrics["time/engine_sync_s"] = sync_s
        if self.ahead is not None:
            metrics["rollout/staleness"] = staleness
            metrics["time/sample_wait_s"] = wait_s  # 0 when the draw kept up with training
        return Step(self.step, samples, advantages, batch, stats, flags, shaping, metrics,
                    failed)

    def draw_ahead(self) -> float | None:
        """Start drawing the next step's samples with the policy's weights now; returns how
        long syncing the engine took (None: nothing to sync). A vLLM engine is synced here, one
        step late: its last draw is done, and the update that follows reaches it next time."""
        assert self.ahead is not None  # called only with --async-steps
        sync_s = None
        if self.engine is not None:
            model = self.update.model  # the engine samples with its own weights
            if self._synced_version != self.update.version:
                t0 = time.perf_counter()
                self.sync_engine()
                sync_s = time.perf_counter() - t0
        else:
            model = self.ahead.frozen_copy(self.policy)
        self.ahead.start(model, self.update.version, self.sampler.state_dict())
        return sync_s

    def update_sampler(self, samples: StepSamples) -> dict[str, Any]:
        """Tell the task sampler how the step's episodes went (every process's); returns the
        step's mix, signal and pass-rate metrics (``task_sampler.mix_metrics``)."""
        roll = samples.rollout
        return step_update(self.sampler, samples.tasks, samples.scores.passed,
                           roll.policy_lengths.tolist(), samples.graded.tolist(),
                           samples.reward_spread.tolist(), samples.group_size,
                           self.procs.gather_objects if self.procs.world > 1 else None)

    def collect(self) -> StepSamples:
        """Generate and score until the step has its P groups (``collect``)."""
        return self.collector.collect(self.update.model)

    def advantages(self, samples: StepSamples) -> Tensor:
        """(B,) group-relative advantages of the graded samples; 0 for the others."""
        c = self.config
        if c.reward_norm == "normalize_then_sum":
            return self._normalize_then_sum(samples)
        graded, rewards = samples.graded, samples.rewards
        batch_std = None
        if c.reward_scaling == "batch" and self.procs.world > 1:
            # A collective: every process takes part, also one whose samples all failed.
            batch_std = self.procs.std(rewards[graded].tolist())
        adv = rewards.new_zeros(len(rewards), dtype=torch.float32)  # the run's device
        if graded.any():
            adv[graded] = grpo.group_advantages(rewards[graded], samples.groups[graded],
                                                samples.moments, c.reward_scaling,
                                                batch_std=batch_std)
        return adv

    def _normalize_then_sum(self, samples: StepSamples) -> Tensor:
        """GDPO's advantages (``grpo.normalize_then_sum``) of the graded samples; 0 for the
        others. The batch's moments are over every process's samples (a collective)."""
        from learner.training.reward_components import reward_components

        graded = samples.graded
        values, weights, _ = reward_components(samples, self.env.reward_weights)
        values, groups = values[graded], samples.groups[graded]
        moments = None
        if self.procs.world > 1:
            summed = grpo.group_normalized_sum(values, weights, groups, len(samples.tasks))
            every = torch.tensor([v for part in self.procs.gather_objects(summed.tolist())
                                  for v in part], dtype=torch.float64)
            moments = (float(every.mean()) if every.numel() else 0.0,
                       float(every.std()) if every.numel() > 1 else 0.0)
        adv = torch.zeros(len(graded), dtype=torch.float32, device=samples.device)
        if graded.any():
            adv[graded] = grpo.normalize_then_sum(values, weights, groups, len(samples.tasks),
                                                  batch_moments=moments).to(adv.device)
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
        kl_counts = c.beta > 0 and not self.update.policy_is_reference
        needed = rows.loss_rows if kl_counts else rows.learning_rows
        if sum(self.procs.gather_ints(int(needed.sum()))) == 0:
            return None
        keep = rows.loss_rows if c.beta > 0 and (kl_counts or c.num_iterations > 1) \
            else rows.learning_rows
        return gather_rows(samples.rollout, rows, keep, advantages, samples.groups)

    # -- evaluation, checkpoints, the loop --------------------------------------------------
    def evaluate(self) -> HeldOut:
        """The held-out evaluation now: its ``eval/*`` metrics and per-task records."""
        e = self.evaluation
        tasks = self.procs.local(heldout_tasks(self.env, e.eval_size))
        gather: Callable[[list], list] | None = None
        if self.procs.world > 1:
            from accelerate.utils import gather_object
            gather = gather_object
        # One gathering of the full weights (ZeRO-3) serves every generation pass.
        with out_of_memory_as("evaluating", f"--eval-batch-size {max(1, e.eval_rows // 2)}",
                              self.step, self.config.steps), \
                sharding.full_weights(self.accelerator, self.update.model) as policy:
            held_out = HeldOut(*heldout_metrics(
                e, policy, self.tokenizer, self.env, tasks, self.scorer, gather))
        if self.accelerator.is_main_process:  # eval.json: the result in the field's shape
            self._write_result(held_out.records)
        return held_out

    def _write_result(self, records: list[dict[str, Any]]) -> None:
        from learner.evaluation.during_training import run_result
        from learner.evaluation.result_shape import RESULT_JSON, write_result

        result = run_result(self.evaluation, self.env, self.step, records)
        out = Path(self.evaluation.output_dir)
        write_result(result, out / RESULT_JSON)
        if self.step == 0:  # before training: compare eval_start.json eval.json
            write_result(result, out / "eval_start.json")

    def save(self) -> None:
        # A draw in flight holds the next step's prompts: a resumed run draws them again.
        ahead = self.ahead
        pending = ahead is not None and ahead.pending
        drawn_from = ahead.position if ahead is not None and pending else None
        sampler = drawn_from if drawn_from is not None else self.sampler.state_dict()
        checkpoint.save(self.accelerator, self.checkpoints.output_dir, self.step,
                        {"position": sampler["position"], "sampler": sampler,
                         "bound": checkpoint_bound.bound(self.config)},
                        keep=self.checkpoints.keep_checkpoints)
        self.saved_step = self.step

    def resume(self) -> bool:
        path = run_layout.latest(self.checkpoints.output_dir)
        if path is None:
            return False
        # What the checkpoint was written under, checked before it loads (launch checks the
        # run's config.json; this holds where that is gone). Older checkpoints have no record.
        problem = checkpoint_bound.resume_mismatch(checkpoint.saved_state(path).get("bound", {}),
                                                   self.config)
        if problem is not None:
            raise checkpoint.CheckpointMismatch(problem)
        state = checkpoint.load(self.accelerator, path)
        # The checkpoint's optimizer and schedule would keep the learning rate the run began
        # with: the flags' (config.json's) apply from here.
        adopt_flags(self.update)
        self.step = state["step"]
        # A checkpoint from before --sampler holds the stream's position alone.
        self.sampler.load_state_dict(state.get("sampler") or {"position": state["position"]})
        self.update.policy_is_reference = self.step == 0
        self.sync_engine()
        self.saved_step = self.step
        if self.accelerator.is_main_process:
            print(f"resumed from step {self.step} of {self.config.steps} "
                  f"({path.relative_to(self.checkpoints.output_dir)})", flush=True)
        return True

    def sync_engine(self) -> None:
        """Load the policy's current weights into the sampling engine (vllm; hf samples from
        the policy itself): streamed a tensor at a time, gathered a bucket at a time under
        ZeRO-3 (never the whole model at once)."""
        if self.engine is not None:
            gather = sharding.bucket_gather(self.accelerator)
            if gather is None:
                self.engine.sync(self.policy)
            else:
                self.engine.sync(self.policy, gather=gather)
            self._synced_version = self.update.version

    def train(self, resumed: bool | None = None) -> dict[str, Any]:
        """Run to ``config.steps`` (``loop.TrainLoop``); returns held-out metrics before (if
        run) and after, the last step's metrics and the reward-hack monitor's total.

        Raises ``RunStopped`` with a checkpoint saved when the run cannot or must not go on:
        ``Interrupted`` on SIGINT/SIGTERM (after the step in progress), ``GradingOutage``
        when samples failed because the grading engine or cluster as a whole does not answer.
        """
        if resumed is None:  # ``resumed``: the caller ran ``resume`` itself (its result)
            resumed = self.checkpoints.resume and self.resume()
        return TrainLoop(self).run(resumed)

    def close(self, *, wait: bool = True) -> None:
        """End the run's process group, every process together (``wait``; not after an error,
        when a peer may never arrive). A process that simply exits while the others still hold
        the group can abort in the group's C++ teardown (SIGABRT, "terminate called without an
        active exception"), failing a run that has finished."""
        if wait:
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
        state_dict = sharding.full_state_dict(self.accelerator, self.update.model)
        if self.accelerator.is_main_process:
            model: Any = self.policy  # a PeftModel under LoRA
            if self.config.lora_r:
                model = model.merge_and_unload()
            # Written from CPU copies, wherever the model lives (``checkpoint``).
            model.save_pretrained(path, state_dict=state_dict if state_dict is not None
                                  else checkpoint.cpu_state_dict(model))
            self.tokenizer.save_pretrained(path)

