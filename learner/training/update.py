"""The update of one step: the reference pass, the policy's loss passes (``--num-iterations``
of them over ``--gradient-accumulation-steps`` micro-batches) and an optimizer step after each.

The first pass runs the policy that generated the samples, so its log-probs are the ratio's
"old" ones, reused by every later iteration. Until the first optimizer step of the run the
policy is the reference itself: its KL and the KL's gradient are then exactly 0, so the
reference pass is not run (its log-probs are the first pass's own). Running it anyway gives a
KL gradient of float noise (~1e-7), which AdamW's first step, normalising by its own magnitude,
turns into a full-size random update.

The ratio's denominator is the first pass's log-probs, unless the samples are stale
(``--async-steps 1``: drawn by the policy before the last optimizer step); then it is the
sampling policy's own, as recorded (off-policy PPO), or, with ``--is-correction``, it stays the
first pass's and the truncated weight pi_first / pi_sampling corrects for the sampling policy
(decoupled PPO: the clip bounds the step from the policy the update starts at).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate import Accelerator
from torch import Tensor

from learner.stage_config import UpdateConfig
from learner.training import grpo, placement
from learner.training.batching import Batch
from learner.training.distributed import Processes
from learner.training.forward import (
    BUCKET_OVERHEAD,
    completion_logprobs,
    packed_positions,
    packing_on,
    padded_positions,
)
from learner.training.mismatch import LogprobMismatch


@dataclass
class UpdateStats:
    """What an update measured, on its last iteration (None: not measured). ``clip_frac`` is
    the share of loss tokens whose objective was clipped, ``clip_frac_low`` and
    ``clip_frac_high`` its two sides (under clip-higher they differ); at the sequence level
    (GSPO) the ratio is clipped per sequence, and ``clip_frac_sequence`` is the share of
    sequences. ``approx_kl``: CleanRL's old->new KL estimate (verl's ``ppo_kl``) of each
    iteration, before its optimizer step (the first is 0 on fresh samples)."""

    skipped: bool = False  # no process had a row to compute: no update at all
    loss: float | None = None
    kl: float | None = None
    clip_frac: float | None = None
    clip_frac_sequence: float | None = None
    clip_frac_low: float | None = None
    clip_frac_high: float | None = None
    approx_kl: list[float] = field(default_factory=list)
    entropy: float | None = None
    grad_norm: float | None = None
    nonfinite_skipped: int = 0  # iterations whose optimizer step a non-finite value cancelled
    trained_tokens: int = 0  # prompt and completion tokens through the loss passes, all iterations
    # The sampling engine's log-probs against the first loss pass's (``mismatch``); empty when
    # the batch carried none.
    mismatch: dict[str, float] = field(default_factory=dict)
    # --is-correction: the weights' mean and the share the cap cut (empty when off).
    is_correction: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        out = {"skipped": self.skipped, "loss": self.loss, "kl": self.kl,
               "clip_frac": self.clip_frac, "entropy": self.entropy,
               "grad_norm": self.grad_norm, "nonfinite_skipped": self.nonfinite_skipped,
               **self.mismatch, **self.is_correction}
        if self.clip_frac_sequence is not None:
            out["clip_frac/sequence"] = self.clip_frac_sequence
        if not self.skipped:
            out.update({"clip_frac/low": self.clip_frac_low, "clip_frac/high": self.clip_frac_high,
                        "approx_kl": self.approx_kl[-1] if self.approx_kl else None})
            if len(self.approx_kl) > 1:  # --num-iterations > 1: how far each one had moved
                out.update({f"approx_kl/iter_{i}": v for i, v in enumerate(self.approx_kl, 1)})
        return out


class PolicyUpdate:
    """Owns what an update changes: the policy, its optimizer and schedule, and whether the
    policy is still the reference."""

    def __init__(self, config: UpdateConfig, accelerator: Accelerator, procs: Processes, model: Any,
                 ref_model: Any, optimizer: Any, scheduler: Any, *, max_tokens: int,
                 deepspeed: bool, device: torch.device | None = None):
        self.config, self.accelerator, self.procs = config, accelerator, procs
        self.model, self.ref_model = model, ref_model
        self.optimizer, self.scheduler = optimizer, scheduler
        self.max_tokens, self.deepspeed = max_tokens, deepspeed
        self.device = device or accelerator.device  # the run's (placement)
        # --packing as this model's attention has it: True, False, or None (auto with flash
        # attention): each update packs when that runs fewer positions (``packing_pays``).
        self.packing = packing_on(config.packing, model)
        self.packed = bool(self.packing)  # the current update's layout
        self.policy_is_reference = True
        self.version = 0  # optimizer steps taken: how far a sample's policy lags is a difference

    # -- log-probs -------------------------------------------------------------------------
    def logprobs(self, model: Any, mb: Batch, entropy: bool = False) -> tuple[Tensor, Tensor | None]:
        """(B, T) log-probs of the completion tokens under the sampling distribution (the
        run's temperature and top-p), and the entropy there (detached)."""
        c = self.config
        # Gradient checkpointing and a KV cache that carries gradients do not mix.
        return completion_logprobs(model, mb.prompt_ids, mb.prompt_mask, mb.completion_ids,
                                   mb.completion_mask, mb.groups, temperature=c.temperature,
                                   top_p=c.top_p, entropy=entropy,
                                   share_prompts=not c.gradient_checkpointing,
                                   packing=self.packed)

    @torch.no_grad()
    def ref_logprobs(self, mb: Batch) -> Tensor:
        """The reference's log-probs, computed exactly as the policy's are (same autocast, so
        bf16 on a GPU), so that the KL at step 0 is 0 rather than the precision gap."""
        with self.accelerator.autocast():
            if self.ref_model is not None:
                return self.logprobs(self.ref_model, mb)[0]
            with self.accelerator.unwrap_model(self.model).disable_adapter():  # LoRA: the base
                return self.logprobs(self.model, mb)[0]

    # -- the update ------------------------------------------------------------------------
    def __call__(self, batch: Batch, staleness: int = 0) -> UpdateStats:
        """Train on ``batch``, drawn ``staleness`` optimizer steps ago (0: by this policy)."""
        c = self.config
        # As many micro-batches on every process (each ends in collectives): the most that
        # any process's token budget needs, and at least --gradient-accumulation-steps, but
        # never more than the fewest rows a process has (a placeholder row sets the count).
        self.packed = packed = (self.packing if self.packing is not None
                                else self.packing_pays(batch))
        wanted = max(c.gradient_accumulation_steps,
                     batch.parts_for(c.micro_batch_tokens, packed=packed))
        parts = min(max(self.procs.gather_ints(wanted)), *self.procs.gather_ints(len(batch)))
        micro = [mb.to(self.device) for mb in batch.split_by_tokens(parts, packed=packed)]
        norm = self._normalisers(batch)
        # from_pretrained returns a model in eval mode: the loss passes run in train mode, so
        # dropout (LoRA's included) and gradient checkpointing apply as configured.
        self.model.train()
        own_ref = c.beta > 0 and self.policy_is_reference
        ref = [self.ref_logprobs(mb) if c.beta > 0 and not own_ref else None for mb in micro]
        mode = c.is_mode
        correct = mode != "none"
        behaviour_ratio = staleness > 0 and not correct  # see the module's docstring
        if (correct or behaviour_ratio) and batch.sampling_logprobs is None:
            raise ValueError("the batch carries no sampling log-probs: --is-correction and stale "
                             "samples (--async-steps 1) need them")
        first: list[Tensor] = []  # the first pass: the policy as the update found it
        old: list[Tensor] = []  # the ratio's denominator
        weights: list[Tensor | None] = [None] * len(micro)  # --is-correction's, else none
        stats = UpdateStats(trained_tokens=batch.tokens * c.num_iterations)
        tally = _Tally(batch)
        # Stale samples' log-probs differ from the first pass by the engine's mismatch and the
        # policy's drift since the draw: logged apart (rollout/stale_*), never as mismatch.
        mismatch = (LogprobMismatch("rollout/stale_" if staleness else "rollout/")
                    if batch.sampling_logprobs is not None else None)
        is_tally = _ISTally(mode) if correct else None
        for it in range(c.num_iterations):
            last_iteration = it == c.num_iterations - 1
            finite = True
            drift = _Drift(batch)
            for i, mb in enumerate(micro):
                with self._sync(last=i == len(micro) - 1), self.accelerator.autocast():
                    logp, entropy = self.logprobs(self.model, mb, entropy=last_iteration)
                    if it == 0:  # the policy before this step's updates
                        first.append(logp.detach())
                        # Each use of the engine's log-probs below needs a batch that carries
                        # them: checked above (behaviour_ratio, is_tally) or by construction
                        # (mismatch).
                        sampled = mb.sampling_logprobs
                        if behaviour_ratio:
                            assert sampled is not None
                            old.append(sampled)
                        else:
                            old.append(first[i])
                        if own_ref:
                            ref[i] = first[i]
                        if mismatch is not None:  # against the engine's, as it sampled
                            assert sampled is not None
                            mismatch.add(first[i], sampled, mb.loss_mask)
                        if is_tally is not None:
                            assert sampled is not None
                            w, cut = grpo.truncated_is_weights(
                                first[i], sampled, mb.loss_mask, mode, c.is_cap, c.is_cap_min)
                            weights[i] = w
                            is_tally.add(w, cut, mb.loss_mask)
                    loss, aux = grpo.grpo_loss(
                        logp, old[i], ref[i], mb.advantages, mb.loss_mask, beta=c.beta,
                        eps_low=c.eps_low, eps_high=c.eps_high, loss_type=c.loss_type,
                        importance_level=c.importance_sampling_level, is_weights=weights[i],
                        kl_ratio=c.bias_corrected_kl, **norm)
                drift.add(aux["approx_kl"], mb.loss_mask)
                # One non-finite micro-batch anywhere cancels this iteration's step everywhere.
                if self.procs.mean(float(torch.isfinite(loss))) == 1.0:
                    self._backward(loss, last=i == len(micro) - 1)
                else:
                    finite = False
                if last_iteration:
                    assert entropy is not None  # asked for on the last iteration
                    tally.add(mb, loss, aux, entropy)
            stats.approx_kl.append(drift.mean(self.procs))
            stats.grad_norm, stepped = self._optimizer_step(finite)
            stats.nonfinite_skipped += not stepped
        tally.write(stats, sequence_level=c.importance_sampling_level == "sequence")
        if mismatch is not None:
            stats.mismatch = mismatch.metrics(self.procs)
        if is_tally is not None:
            stats.is_correction = is_tally.metrics(self.procs)
        if c.beta == 0:
            stats.kl = None  # no reference: nothing was measured (null, not a KL of 0)
        return stats

    def packing_pays(self, batch: Batch) -> bool:
        """--packing auto, where the attention packs without a mask: whether packing
        ``batch`` runs fewer positions than the padded passes would. Packing repeats each
        group's prompt for every row and runs no padding; the padded passes run a group's
        prompt once (not under gradient checkpointing) and their length buckets' padding. At
        G=8 and a prompt of 150 tokens, completions of 100-512 tokens pad less than the
        prompts' repeats; short, ragged completions the other way round."""
        c = self.config
        overhead = BUCKET_OVERHEAD.get(self.device.type, BUCKET_OVERHEAD["default"])
        parts = max(c.gradient_accumulation_steps, batch.parts_for(c.micro_batch_tokens))
        padded = sum(padded_positions(mb.prompt_mask, mb.completion_mask, mb.groups,
                                      bucket_overhead=overhead,
                                      share_prompts=not c.gradient_checkpointing)
                     for mb in batch.split_by_tokens(parts))
        return packed_positions(batch.prompt_mask, batch.completion_mask) < padded

    def skip(self) -> UpdateStats:
        """No process has a row to compute: no update, and the schedule still counts the step.
        Nothing was measured, so the step logs no loss figures (null in metrics.jsonl, a gap
        in the plots) rather than numbers that read as measurements."""
        for _ in range(self.config.num_iterations):
            self._scheduler_step()
        return UpdateStats(skipped=True)

    def _normalisers(self, batch: Batch) -> dict[str, Any]:
        # Gradients are averaged over processes, so the normalisers are the per-process means of
        # the counts: the averaged gradient then equals the global sum over the global count.
        # Dr. GRPO's is a constant, P * G (* L in ``aggregate``).
        c = self.config
        sequences = (c.prompts_per_step * c.group_size / self.procs.world
                     if c.loss_type == "dr_grpo" else self.procs.mean(batch.n_sequences))
        return {"total_sequences": sequences, "total_tokens": self.procs.mean(batch.n_tokens),
                "max_tokens": self.max_tokens}

    def _sync(self, last: bool) -> contextlib.AbstractContextManager:
        # DDP all-reduces gradients on the last micro-batch only (DeepSpeed is told in backward).
        if last or self.deepspeed:
            return contextlib.nullcontext()
        return self.accelerator.no_sync(self.model)

    def _backward(self, loss: Tensor, last: bool) -> None:
        if self.deepspeed:
            self.model.set_gradient_accumulation_boundary(last)
            self.model.backward(loss)  # the engine reduces gradients on the boundary
        else:
            self.accelerator.backward(loss)

    def _optimizer_step(self, finite: bool) -> tuple[float | None, bool]:
        """Clip, step and zero the gradients; returns the gradient norm and whether the policy
        moved (not when a loss or the gradient was non-finite)."""
        grad_norm, stepped = None, False
        if self.deepspeed:
            # The engine clips (config "gradient_clipping"), steps and zeroes the gradients.
            if finite:
                self.model.step()
                norm = self.model.get_global_grad_norm()
                grad_norm, stepped = (math.nan if norm is None else float(norm)), True
            else:
                self.model.zero_grad()
        elif finite:
            grad_norm = self._grad_norm()
            if math.isfinite(grad_norm):
                self.optimizer.step()
                stepped = True
        if stepped:
            self.policy_is_reference = False
            self.version += 1
        self._scheduler_step()
        if not self.deepspeed:
            self.optimizer.zero_grad(set_to_none=True)
        placement.settle(self.device)  # the new weights as data, not as the step's graph
        return grad_norm, stepped

    def _grad_norm(self) -> float:
        """The gradient's norm, after clipping it to ``--max-grad-norm`` when that is set."""
        if self.config.max_grad_norm > 0:
            return float(self.accelerator.clip_grad_norm_(self.model.parameters(),
                                                          self.config.max_grad_norm))
        return float(torch.norm(torch.stack([p.grad.norm() for p in self.model.parameters()
                                             if p.grad is not None])))

    def _scheduler_step(self) -> None:
        with warnings.catch_warnings():
            # The schedule counts steps, skipped ones included; torch's warning that the
            # scheduler stepped before the optimizer ever did reads like a bug to a user.
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler")
            self.scheduler.step()


class _Tally:
    """The last iteration's figures, summed over micro-batches: token means over the batch's
    loss tokens, and the share of its sequences whose (sequence-level) ratio was clipped."""

    def __init__(self, batch: Batch):
        self.tokens = max(int(batch.loss_mask.sum()), 1)
        self.sequences = max(int((batch.loss_mask.sum(-1) > 0).sum()), 1)
        self.loss = self.kl = self.clipped = self.clipped_rows = self.entropy = 0.0
        self.low = self.high = 0.0

    @torch.no_grad()
    def add(self, mb: Batch, loss: Tensor, aux: dict[str, Tensor], entropy: Tensor) -> None:
        m = mb.loss_mask.bool()
        self.loss += float(loss)
        self.kl += float(aux["kl"][m].sum())
        self.clipped += float(aux["clipped"][m].float().sum())
        self.clipped_rows += float((aux["clipped"] & m).any(-1).sum())
        self.low += float(aux["clipped_low"][m].float().sum())
        self.high += float(aux["clipped_high"][m].float().sum())
        self.entropy += float(entropy[m].sum())

    def write(self, stats: UpdateStats, sequence_level: bool) -> None:
        stats.loss = self.loss
        stats.kl = self.kl / self.tokens
        stats.clip_frac = self.clipped / self.tokens
        stats.clip_frac_low, stats.clip_frac_high = self.low / self.tokens, self.high / self.tokens
        stats.entropy = self.entropy / self.tokens
        if sequence_level:
            stats.clip_frac_sequence = self.clipped_rows / self.sequences


class _Drift:
    """One iteration's ``approx_kl`` summed over its micro-batches' loss tokens."""

    def __init__(self, batch: Batch):
        self.tokens = float(batch.loss_mask.sum())
        self.total = 0.0

    @torch.no_grad()
    def add(self, approx_kl: Tensor, loss_mask: Tensor) -> None:
        self.total += float(approx_kl[loss_mask.bool()].sum())

    def mean(self, procs: Processes) -> float:
        """Per loss token over every process (a collective); NaN when there was none."""
        tokens, total = procs.mean(self.tokens), procs.mean(self.total)
        return total / tokens if tokens else math.nan


class _ISTally:
    """--is-correction's weights over the step: per loss token at the token level, per
    completion (with a loss token) at the sequence level."""

    def __init__(self, level: str):
        self.sequence = level.startswith("sequence")
        self.total = self.cut = self.n = 0.0

    @torch.no_grad()
    def add(self, weights: Tensor, cut: Tensor, loss_mask: Tensor) -> None:
        m = loss_mask.bool()
        if self.sequence:  # a row's weight is repeated over its tokens: count it once
            rows = m.any(-1)
            weights, cut = weights[:, 0][rows], cut[:, 0][rows]
        else:
            weights, cut = weights[m], cut[m]
        self.total += float(weights.sum())
        self.cut += float(cut.sum())
        self.n += weights.numel()

    def metrics(self, procs: Processes) -> dict[str, float]:
        """Over every process's tokens (or completions); NaN when there were none."""
        n = procs.mean(self.n)  # collectives: every process calls them
        total, cut = procs.mean(self.total), procs.mean(self.cut)
        # is_clipped_frac: the share the bounds acted on (clamped, or masked to 0).
        return {"rollout/is_weight_mean": total / n if n else math.nan,
                "rollout/is_clipped_frac": cut / n if n else math.nan}
