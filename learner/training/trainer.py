"""The GRPO training loop: generate -> score -> advantages -> clipped-surrogate updates.

A step reads top to bottom in ``train_step``: ``collect`` (generate and grade through the env),
``make_batch`` (advantages, rows; ``batching``), ``train_on`` (reference and policy passes, the
loss of ``grpo``, the optimizer), then metrics, the reward-hack monitor's flags and, every
``--eval-every`` steps, the held-out evaluation (``learner.evaluation``). It runs unchanged as
one process or under ``accelerate launch`` (DDP, DeepSpeed): every process takes its share of
the step's prompts, groups never span processes, gradients are averaged by the wrapped model,
and the few numbers that must be global go through ``distributed``.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from collections import Counter
from typing import Any

import gymnasium as gym
import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from torch import Tensor
from tqdm.auto import tqdm
from transformers import get_scheduler

from envs.base import TaskEnv
from learner import onednn_linear
from learner.config import Config
from learner.episodes import ChatBridge, episode_metrics, is_multi_turn, run_episodes
from learner.evaluation.heldout import evaluate, heldout_tasks
from learner.model import chat_prompt, load_model, load_tokenizer, with_lora
from learner.rollout import Rollout, generate
from learner.scoring import RemoteScorer, Scores, infra_reason, score_all
from learner.training import checkpoint, grpo, hack_monitor, sharding
from learner.training.batching import Batch, gather_rows, merge_rollouts, select_rows
from learner.training.data import PromptStream
from learner.training.distributed import Processes, cpu_threads, share_quota
from learner.training.forward import completion_logprobs
from learner.training.hack_monitor import HackMonitor, StepFlags, StepShaping, flag_credited
from learner.training.metrics import RunLog


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
    def __init__(self, config: Config, *, model=None, tokenizer=None, env: TaskEnv | None = None,
                 accelerator: Accelerator | None = None, scorer: RemoteScorer | None = None):
        self.config = c = config
        cuda = torch.cuda.is_available()
        # cpu=True lets accelerate run several CPU processes over gloo (its MULTI_CPU mode).
        # DeepSpeed refuses cpu=True; on CPU it is told to use gloo instead.
        deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true"
        handlers = [InitProcessGroupKwargs(backend="gloo")] if deepspeed and not cuda else []
        # The scheduler counts optimizer steps (accelerate would step it once per process).
        self.accelerator = accelerator or Accelerator(
            mixed_precision="bf16" if cuda else "no", cpu=not (cuda or deepspeed),
            step_scheduler_with_optimizer=False, kwargs_handlers=handlers)
        self.procs = Processes(self.accelerator)
        sharding.check_supported(self.accelerator, lora=c.lora_r > 0)
        self.deepspeed = sharding.uses_deepspeed(self.accelerator)
        sharding.configure_deepspeed(self.accelerator, c.max_grad_norm)
        if c.num_threads or self.accelerator.device.type == "cpu":
            torch.set_num_threads(c.num_threads or cpu_threads(self.accelerator.num_processes))
        set_seed(c.seed, device_specific=True)  # each process samples differently
        self.env = env or gym.make(c.env, **c.env_options()).unwrapped
        if scorer is None and c.ray_address:  # --ray-address: grade on the cluster
            from envs.ray_scoring import RayScorer

            scorer = RayScorer(self.env, c.ray_address)
        self.scorer = scorer
        self.tokenizer = tokenizer or load_tokenizer(c.model)
        # Multi-turn envs: episodes of several policy turns with tool outputs in between.
        self.bridge = ChatBridge(self.tokenizer, c.tool_role) if is_multi_turn(self.env) else None
        model = model or load_model(c.model)
        if c.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            model.config.use_cache = True  # generation still uses the KV cache (eval mode)
        self.ref_model = None
        if c.lora_r:
            model = with_lora(model, c.lora_r, c.lora_alpha, c.lora_dropout)
        elif c.beta > 0:
            # A frozen copy of the initial policy (with LoRA, the base model with adapters off).
            self.ref_model = sharding.reference_copy(model, c.model).eval().requires_grad_(False)
        optimizer = adamw([p for p in model.parameters() if p.requires_grad],
                          fused=not self.deepspeed, lr=c.learning_rate,
                          betas=(c.adam_beta1, c.adam_beta2), weight_decay=c.weight_decay)
        scheduler = get_scheduler(
            c.lr_scheduler, optimizer, num_warmup_steps=c.warmup_steps * c.num_iterations,
            num_training_steps=c.steps * c.num_iterations)
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(
            model, optimizer, scheduler)
        if self.ref_model is not None:
            self.ref_model = sharding.prepare_reference(self.accelerator, self.ref_model)
        if not self.deepspeed:  # ZeRO-3 wraps the Linear layers' products itself
            for m in (self.model, self.ref_model):
                if m is not None:
                    onednn_linear.route_on_cpu(m, c.cpu_matmul)
        self.stream = PromptStream(self.env, "train", seed=c.seed)
        self.step = 0
        # Until the first optimizer step the policy is the reference itself. Its KL is then 0
        # with a zero gradient, exactly, so the reference pass is not run (its log-probs are
        # the policy's own) and a step whose groups are all flat has nothing to learn. Running
        # the reference anyway gives a KL gradient of float noise (~1e-7), which AdamW's first
        # step, normalising by its own magnitude, turns into a full-size random update.
        self.policy_is_reference = True

    # -- helpers ----------------------------------------------------------------------------
    @property
    def policy(self):
        return self.accelerator.unwrap_model(self.model)

    @property
    def world(self) -> tuple[int, int]:
        return self.procs.rank, self.procs.world

    # -- one step ---------------------------------------------------------------------------
    def rollout(self, n_prompts: int) -> tuple[list, Rollout, Scores, float, float]:
        c = self.config
        tasks = self.procs.local(self.stream.take(n_prompts))
        prompts = [chat_prompt(self.tokenizer, self.env.prompt(t)) for t in tasks]
        t0 = time.perf_counter()
        if self.bridge is not None:
            return (tasks, *self._episodes(tasks, [self.env.prompt(t) for t in tasks]))
        # bf16 autocast on CUDA (a no-op on CPU); full weights even under ZeRO-3.
        with self.accelerator.autocast(), sharding.full_weights(self.accelerator,
                                                                 self.model) as policy:
            roll = generate(policy, self.tokenizer, prompts, group_size=c.group_size,
                            max_new_tokens=c.max_new_tokens, temperature=c.temperature,
                            top_p=c.top_p)
        t1 = time.perf_counter()
        repeated = [t for t in tasks for _ in range(c.group_size)]
        scores = score_all(self.env, repeated, roll.texts, c.score_workers, self.scorer)
        return tasks, roll, scores, t1 - t0, time.perf_counter() - t1

    def _episodes(self, tasks: list, user_texts: list[str]
                  ) -> tuple[Rollout, Scores, float, float]:
        """Multi-turn rollouts (``learner.episodes``): generation and the env's steps take
        turns, so the times are the sums of each."""
        c = self.config
        with self.accelerator.autocast(), sharding.full_weights(self.accelerator,
                                                                 self.model) as policy:
            eps = run_episodes(policy, self.tokenizer, self.env, tasks, user_texts,
                               group_size=c.group_size, max_new_tokens=c.max_new_tokens,
                               max_episode_tokens=c.max_episode_tokens,
                               temperature=c.temperature, top_p=c.top_p,
                               workers=c.score_workers, bridge=self.bridge)
        return eps.rollout, eps.scores, eps.generate_s, eps.step_s

    @property
    def max_completion_tokens(self) -> int:
        """The most policy tokens a completion can hold (Dr. GRPO's constant normaliser)."""
        c = self.config
        if self.bridge is None:
            return c.max_new_tokens
        most = c.max_new_tokens * int(self.env.max_turns)
        return min(most, c.max_episode_tokens) if c.max_episode_tokens else most

    def collect(self) -> dict[str, Any]:
        """Generate and score until the step has its P groups (see ``--dynamic-sampling``)."""
        c = self.config
        tasks, rolls, scores, gen_s, score_s = [], [], [], 0.0, 0.0
        informative, tries = 0, 0
        while True:
            tries += 1
            want = c.prompts_per_step if tries == 1 else c.prompts_per_step - informative
            want = max(want, self.world[1])  # every process needs at least one prompt
            t, r, s, g, sc = self.rollout(want)
            tasks += t
            rolls.append(r)
            scores.append(s)
            gen_s, score_s = gen_s + g, score_s + sc
            rewards = torch.tensor([x for s_ in scores for x in s_.rewards])
            infra = torch.tensor([x for s_ in scores for x in s_.infra_error])
            groups = torch.arange(len(tasks)).repeat_interleave(c.group_size)
            std = grpo.group_std(rewards[~infra], groups[~infra], len(tasks))
            informative = sum(self.procs.gather_ints(int((std > 0).sum())))
            if not c.dynamic_sampling or informative >= c.prompts_per_step \
                    or tries >= c.max_sampling_tries:
                break
        roll = merge_rollouts(rolls, self.tokenizer.pad_token_id)
        merged = Scores(
            rewards=[x for s in scores for x in s.rewards],
            components=[x for s in scores for x in s.components],
            passed=[x for s in scores for x in s.passed],
            infra_error=[x for s in scores for x in s.infra_error],
            infos=[x for s in scores for x in s.infos],
        )
        return {"tasks": tasks, "rollout": roll, "scores": merged, "groups": groups,
                "rewards": rewards, "infra": infra, "group_std": std, "tries": tries,
                "time/generate_s": gen_s, "time/score_s": score_s}

    def make_batch(self, col: dict[str, Any]) -> tuple[Batch | None, Tensor]:
        """The step's rows to compute (``batching``), and the advantage of every sample;
        ``None`` when no process has a row to compute."""
        c = self.config
        roll, groups, valid = col["rollout"], col["groups"], ~col["infra"]
        adv = torch.zeros(len(groups))
        # A collective: every process takes part, also one whose samples all failed to grade.
        batch_std = (self.procs.std(col["rewards"][valid].tolist())
                     if c.scale_rewards == "batch" and self.procs.world > 1 else None)
        if valid.any():
            adv[valid] = grpo.group_advantages(col["rewards"][valid], groups[valid],
                                               c.scale_rewards, batch_std=batch_std)
        in_step = valid
        if c.dynamic_sampling:  # DAPO: the step trains the first P groups with reward spread
            informative = (col["group_std"] > 0).nonzero().squeeze(-1)
            quota = share_quota(self.procs.gather_ints(len(informative)), c.prompts_per_step)
            in_step = torch.isin(groups, informative[: quota[self.procs.rank]]) & valid
        # While the policy is the reference, zero-advantage rows add exactly nothing (see
        # ``policy_is_reference``): they are left out as with beta == 0.
        beta = 0.0 if self.policy_is_reference else c.beta
        rows = select_rows(roll, in_step, adv, beta=beta, mask_truncated=c.mask_truncated)
        if sum(self.procs.gather_ints(int(rows.keep.sum()))) == 0:
            return None, adv  # no process has a row to compute: the step is skipped
        placeholder = not rows.keep.any()
        if placeholder:
            rows.keep = torch.zeros_like(rows.keep)
            rows.keep[0] = True
        return gather_rows(roll, rows, adv, groups, placeholder=placeholder), adv

    def _logprobs(self, model, mb: Batch, entropy: bool = False) -> tuple[Tensor, Tensor | None]:
        """(B, T) log-probs at every completion position (and the entropy there, detached)."""
        # Gradient checkpointing and a KV cache that carries gradients do not mix.
        return completion_logprobs(model, mb.prompt_ids, mb.prompt_mask, mb.completion_ids,
                                   mb.completion_mask, mb.groups,
                                   temperature=self.config.temperature, entropy=entropy,
                                   share_prompts=not self.config.gradient_checkpointing)

    @torch.no_grad()
    def _ref_logprobs(self, mb: Batch) -> Tensor:
        """The reference's log-probs, computed exactly as the policy's are (same autocast, so
        bf16 on a GPU), so that the KL at step 0 is 0 rather than the precision gap."""
        with self.accelerator.autocast():
            if self.ref_model is not None:
                return self._logprobs(self.ref_model, mb)[0]
            with self.policy.disable_adapter():  # LoRA: the reference is the base model
                return self._logprobs(self.model, mb)[0]

    def train_on(self, batch: Batch) -> dict[str, float]:
        c = self.config
        dev = self.accelerator.device
        micro = [mb.to(dev) for mb in batch.split(c.gradient_accumulation_steps)]
        # Gradients are averaged over processes, so the normalisers are the per-process means of
        # the counts: the averaged gradient then equals the global sum over the global count.
        # Dr. GRPO's is a constant, P * G (* max_new_tokens in ``aggregate``).
        sequences = (c.prompts_per_step * c.group_size / self.world[1]
                     if c.loss_type == "dr_grpo" else self.procs.mean(batch.n_sequences))
        norm = {"total_sequences": sequences, "total_tokens": self.procs.mean(batch.n_tokens),
                "max_tokens": self.max_completion_tokens}
        # from_pretrained returns a model in eval mode: the loss passes run in train mode, so
        # dropout (LoRA's included) and gradient checkpointing apply as configured.
        self.model.train()
        # While the policy is the reference, the reference's log-probs are the first pass's own.
        own_ref = c.beta > 0 and self.policy_is_reference
        run_ref = c.beta > 0 and not self.policy_is_reference
        old: list[Tensor] = []
        ref: list[Tensor | None] = [self._ref_logprobs(mb) if run_ref else None for mb in micro]
        stats = {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "entropy": 0.0, "grad_norm": 0.0,
                 "nonfinite_skipped": 0.0}
        tokens = max(int(batch.loss_mask.sum()), 1)
        for it in range(c.num_iterations):
            for i, mb in enumerate(micro):
                last = i == len(micro) - 1
                # DDP all-reduces gradients on the last micro-batch only (DeepSpeed is told below).
                ctx = contextlib.nullcontext() if last or self.deepspeed else \
                    self.accelerator.no_sync(self.model)
                with ctx, self.accelerator.autocast():
                    logp, entropy = self._logprobs(self.model, mb,
                                                   entropy=it == c.num_iterations - 1)
                    # The first pass runs the generating policy itself: its log-probs are the
                    # "old" ones, so no extra forward pass is needed for them.
                    if it == 0:
                        old.append(logp.detach())
                        if own_ref:
                            ref[i] = old[i]
                    loss, aux = grpo.grpo_loss(
                        logp, old[i], ref[i], mb.advantages, mb.loss_mask, beta=c.beta,
                        eps_low=c.epsilon, eps_high=c.eps_high, loss_type=c.loss_type,
                        importance_level=c.importance_sampling_level, **norm)
                finite = self.procs.mean(float(torch.isfinite(loss))) == 1.0
                if finite and self.deepspeed:
                    self.model.set_gradient_accumulation_boundary(last)
                    self.model.backward(loss)  # the engine reduces gradients on the boundary
                elif finite:
                    self.accelerator.backward(loss)
                else:
                    stats["nonfinite_skipped"] = 1.0
                if it == c.num_iterations - 1:
                    m = mb.loss_mask.bool()
                    with torch.no_grad():
                        stats["loss"] += float(loss)
                        stats["kl"] += float(aux["kl"][m].sum()) / tokens
                        stats["clip_frac"] += float(aux["clipped"][m].float().sum()) / tokens
                        stats["entropy"] += float(entropy[m].sum()) / tokens
            stats["grad_norm"] = self._optimizer_step(stats)
        if c.beta == 0:
            stats["kl"] = None  # no reference: nothing was measured (null, not a KL of 0)
        return stats

    def _optimizer_step(self, stats: dict[str, float]) -> float:
        c = self.config
        grad_norm = float("nan")
        if self.deepspeed:
            # The engine clips (config "gradient_clipping"), steps and zeroes the gradients.
            if stats["nonfinite_skipped"] == 0.0:
                self.model.step()
                self.policy_is_reference = False
                norm = self.model.get_global_grad_norm()
                grad_norm = float("nan") if norm is None else float(norm)
            else:
                self.model.zero_grad()
            self._scheduler_step()
            return grad_norm
        if stats["nonfinite_skipped"] == 0.0:
            if c.max_grad_norm > 0:
                grad_norm = float(self.accelerator.clip_grad_norm_(
                    self.model.parameters(), c.max_grad_norm))
            else:
                grad_norm = float(torch.norm(torch.stack([
                    p.grad.norm() for p in self.model.parameters() if p.grad is not None])))
            if math.isfinite(grad_norm):
                self.optimizer.step()
                self.policy_is_reference = False
            else:
                stats["nonfinite_skipped"] = 1.0
        self._scheduler_step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def _scheduler_step(self) -> None:
        with warnings.catch_warnings():
            # The schedule counts steps, skipped ones included; torch's warning that the
            # scheduler stepped before the optimizer ever did reads like a bug to a user.
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler")
            self.scheduler.step()

    def train_step(self) -> dict[str, Any]:
        c = self.config
        start = time.perf_counter()
        col = self.collect()
        batch, adv = self.make_batch(col)
        t0 = time.perf_counter()
        if batch is not None:  # None on every process alike (see make_batch)
            stats = self.train_on(batch)
            trained_tokens = batch.tokens
        else:
            # No process has a row to compute (beta == 0 and every group flat): no update.
            # Nothing was measured, so the step logs ``skipped`` and no loss figures (null in
            # metrics.jsonl, a gap in the plots) rather than numbers that read as measurements.
            for _ in range(c.num_iterations):
                self._scheduler_step()
            stats = {"skipped": True, "loss": None, "kl": None, "clip_frac": None,
                     "entropy": None, "grad_norm": None, "nonfinite_skipped": 0.0}
            trained_tokens = 0
        train_s = time.perf_counter() - t0
        self.step += 1
        col["flags"] = self._flag_credited(col)
        col["shaping"] = self._shaping_only(col)
        metrics = self._step_metrics(col, stats, batch)
        total_s = time.perf_counter() - start
        roll = col["rollout"]
        metrics.update({
            "lr": self.scheduler.get_last_lr()[0],
            "time/step_s": total_s,
            "time/generate_s": col["time/generate_s"],
            "time/score_s": col["time/score_s"],
            "time/train_s": train_s,
            "tokens_per_s": self.procs.mean(roll.generated_tokens / total_s) * self.world[1],
            "tokens_per_s/generate": self.procs.mean(
                roll.generated_tokens / max(col["time/generate_s"], 1e-9)) * self.world[1],
            "tokens_per_s/train": self.procs.mean(trained_tokens * c.num_iterations / max(train_s, 1e-9))
            * self.world[1],
        })
        self._last = (col, adv)
        return metrics

    def _flag_credited(self, col: dict[str, Any]) -> StepFlags:
        """The env's flags over this step's credited samples, summed over processes."""
        roll, g = col["rollout"], self.config.group_size
        tasks = [t for t in col["tasks"] for _ in range(g)]
        local = flag_credited(self.env, tasks, roll.texts, col["scores"].infos,
                              roll.truncated.tolist())
        parts = self.procs.gather_objects(local)
        reasons: Counter[str] = Counter()
        for part in parts:
            reasons.update(part.reasons)
        return StepFlags(sum(p.credited for p in parts), sum(p.flagged for p in parts), reasons)

    def _shaping_only(self, col: dict[str, Any]) -> StepShaping:
        """Samples paid by the env's shaping terms alone (``hack_monitor``), over processes."""
        scores = col["scores"]
        local = hack_monitor.shaping_only(self.env, scores.components, scores.passed,
                                          (~col["infra"]).tolist())
        parts = self.procs.gather_objects(local)
        terms: Counter[str] = Counter()
        for part in parts:
            terms.update(part.terms)
        return StepShaping(sum(p.graded for p in parts), sum(p.passed for p in parts),
                           sum(p.shaping_only for p in parts), terms)

    def _step_metrics(self, col: dict[str, Any], stats: dict[str, float],
                      batch: Batch | None) -> dict[str, Any]:
        scores, valid = col["scores"], ~col["infra"]
        rewards = col["rewards"][valid]
        roll = col["rollout"]
        out: dict[str, Any] = {
            "reward/mean": float(rewards.mean()) if rewards.numel() else float("nan"),
            "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        }
        names = sorted({k for comp in scores.components for k in comp})
        for name in names:
            vals = [comp.get(name, 0.0) for comp, ok in zip(scores.components, valid, strict=True)
                    if ok]
            out[f"reward/{name}"] = sum(vals) / max(len(vals), 1)
        out["accuracy"] = sum(p for p, ok in zip(scores.passed, valid, strict=True) if ok) / max(
            int(valid.sum()), 1)
        out.update({
            "group/std_mean": float(col["group_std"].mean()),
            "group/frac_zero_std": float((col["group_std"] == 0).float().mean()),
            "group/sampling_tries": col["tries"],
            "group/trained": 0 if batch is None else int(batch.groups.unique().numel()),
            "samples/sandbox_errors": int(col["infra"].sum()),
            "completion/len_mean": float(roll.lengths.float().mean()),
            "completion/truncated_frac": float(roll.truncated.float().mean()),
            **stats,
        })
        if roll.action_mask is not None:
            out.update(episode_metrics(scores.infos, valid.tolist(), roll.action_mask.sum(-1)))
        out = {k: self.procs.mean(v) if isinstance(v, float | int) and not isinstance(v, bool) else v
               for k, v in out.items()}
        out.update(hack_monitor.step_metrics(col["flags"]))  # already global: not averaged
        shaping = col["shaping"]
        if shaping.graded:
            out["samples/shaping_only_frac"] = shaping.shaping_only / shaping.graded
        return out

    def sample_groups(self, n: int) -> list[dict[str, Any]]:
        col, adv = self._last
        c = self.config
        out = []
        for g, task in enumerate(col["tasks"][:n]):
            rows = range(g * c.group_size, (g + 1) * c.group_size)
            out.append({
                "task_id": task.id,
                "prompt": self.env.prompt(task),
                "completions": [col["rollout"].texts[i] for i in rows],
                "rewards": [col["scores"].components[i] for i in rows],
                "reward": [col["scores"].rewards[i] for i in rows],
                "passed": [col["scores"].passed[i] for i in rows],
                "advantages": [round(float(adv[i]), 4) for i in rows],
            })
            if col["rollout"].transcripts is not None:  # multi-turn: every turn, with its role
                out[-1]["transcripts"] = [col["rollout"].transcripts[i] for i in rows]
                out[-1]["truncated"] = [bool(col["rollout"].truncated[i]) for i in rows]
        return out

    # -- evaluation, checkpoints, the loop --------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        c = self.config
        tasks = self.procs.local(heldout_tasks(self.env, c.eval_size))
        gather = None
        if self.world[1] > 1:
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
        checkpoint.save(self.accelerator, self.config.output_dir, self.step,
                        {"position": self.stream.position}, keep=self.config.keep_checkpoints)

    def resume(self) -> bool:
        path = checkpoint.latest(self.config.output_dir)
        if path is None:
            return False
        state = checkpoint.load(self.accelerator, path)
        self.step, self.stream.position = state["step"], state["position"]
        self.policy_is_reference = self.step == 0
        return True

    def train(self) -> dict[str, Any]:
        """Run to ``config.steps``; returns held-out metrics before (if run) and after."""
        c = self.config
        resumed = c.resume and self.resume()
        main = self.accelerator.is_main_process
        log = RunLog(c.output_dir, resume_step=self.step if resumed else None) if main else None
        result: dict[str, Any] = {"resumed_from": self.step if resumed else None}
        if c.eval and not resumed:
            result["before"] = self.evaluate()
            if log:
                log.log(0, result["before"])
        metrics: dict[str, Any] = {}
        bar = tqdm(total=c.steps, initial=self.step, disable=not (main and c.progress),
                   desc="grpo", dynamic_ncols=True)
        monitor = HackMonitor()
        infra_warned = False
        while self.step < c.steps:
            metrics = self.train_step()
            col = self._last[0]
            for warning in (monitor.observe(self.step, col["flags"]),
                            monitor.observe_shaping(self.step, col["shaping"])):
                if warning and main:
                    tqdm.write(f"warning: {warning}")
            if metrics["samples/sandbox_errors"] and not infra_warned and main:
                # Once: a sandbox that is down fails every sample that needs it, every step.
                infra_warned = True
                tqdm.write(f"warning: {self._infra_notice(metrics)}")
            if c.eval and c.eval_every and self.step % c.eval_every == 0 and self.step < c.steps:
                metrics.update(self.evaluate())
            if c.eval and self.step == c.steps:
                result["after"] = self.evaluate()
                metrics.update(result["after"])
            if log:
                log.log(self.step, metrics)
                # The last step's groups too: a run shorter than K steps still leaves some.
                if c.samples_every and (self.step % c.samples_every == 0
                                        or self.step == c.steps):
                    log.samples(self.step, self.sample_groups(c.samples_groups))
            if (c.save_every and self.step % c.save_every == 0) or self.step == c.steps:
                self.save()
            flagged, kl = metrics.get("flags/credited_frac"), metrics.get("kl")
            bar.set_postfix(step=self.step, reward=f"{metrics['reward/mean']:.3f}",
                            kl="skipped" if metrics.get("skipped") else "-" if kl is None
                            else f"{kl:.4f}",
                            flagged="-" if flagged is None else f"{flagged:.0%}", refresh=False)
            bar.update(1)
        bar.close()
        if log:
            log.close()
        result["final_metrics"] = metrics
        result["flags"] = monitor.total
        return result

    def _infra_notice(self, metrics: dict[str, Any]) -> str:
        col = self._last[0]
        n = len(col["infra"]) * self.world[1]
        errors = metrics["samples/sandbox_errors"] * self.world[1]
        reason = infra_reason(col["scores"]) or "on another process"
        return (f"step {self.step}: {errors:.0f} of {n} samples were not scored because the "
                f"sandbox failed ({reason}). They are dropped, not scored 0, and counted in "
                "samples/sandbox_errors; while this lasts, the run learns only from the rest.")

    def close(self) -> None:
        """End the run's process group, every process together. A process that simply exits
        while the others still hold the group can abort in the group's C++ teardown (SIGABRT,
        "terminate called without an active exception"), failing a run that has finished."""
        self.accelerator.wait_for_everyone()  # no-op for a single process
        self.accelerator.end_training()

    def save_model(self, path) -> None:
        """Save the trained policy (merged with LoRA adapters) and tokenizer for later use."""
        self.accelerator.wait_for_everyone()
        state_dict = sharding.full_state_dict(self.accelerator, self.model)
        if self.accelerator.is_main_process:
            model = self.policy
            if self.config.lora_r:
                model = model.merge_and_unload()
            model.save_pretrained(path, state_dict=state_dict)
            self.tokenizer.save_pretrained(path)
