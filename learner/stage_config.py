"""The part of the run's configuration each stage takes: sampling (``SamplingConfig``), the vLLM
engine that may sample (``EngineConfig``), the update (``UpdateConfig``), the held-out evaluation
(``EvalConfig``) and checkpoints (``CheckpointConfig``).

Each is a frozen dataclass whose fields are ``Config``'s fields or derived properties of the same
name and meaning (``eps_low``, ``is_mode``, ``eval_rows``: already resolved), so a stage sees the
values it uses and nothing else. ``of(config)`` is the one place they are built: the trainer
builds each once, after it has resolved what config.json records (``autocast``, ``packing``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from learner.choices import (
    AsyncSteps,
    CpuMatmul,
    DynamicSamplingMetric,
    ImportanceLevel,
    LossType,
    LrScheduler,
    Packing,
    RolloutEngine,
    ToolRole,
    VllmDtype,
    VllmLora,
)

if TYPE_CHECKING:
    from learner.config import Config


@dataclass(frozen=True)
class _Part:
    @classmethod
    def of(cls, config: Config) -> Self:
        """This part of ``config``: each field read from the ``Config`` attribute of its name."""
        values: dict[str, Any] = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
        return cls(**values)


@dataclass(frozen=True)
class SamplingConfig(_Part):
    """A step's samples (``training.collect.Collector``): how many, how they are decoded and
    graded, DAPO's dynamic sampling and overlong shaping."""

    prompts_per_step: int
    group_size: int
    max_new_tokens: int
    max_episode_tokens: int
    temperature: float
    top_p: float
    dynamic_sampling: bool
    dynamic_sampling_metric: DynamicSamplingMetric
    max_sampling_tries: int
    async_steps: AsyncSteps
    micro_batch_tokens: int  # the draw's own forward pass (--async-steps 1)
    score_workers: int
    overlong_cache: int
    overlong_max: int


@dataclass(frozen=True)
class EngineConfig(_Part):
    """The vLLM engine that samples with ``--rollout-engine vllm`` (``sampling.engine``) and its
    size (``training.vllm_sizing``)."""

    rollout_engine: RolloutEngine
    model: str | None
    seed: int
    lora_r: int
    async_steps: AsyncSteps
    prompts_per_step: int
    group_size: int
    vllm_gpu_memory_utilization: float
    vllm_max_model_len: int
    vllm_max_num_seqs: int
    vllm_dtype: VllmDtype
    vllm_lora: VllmLora
    vllm_sleep: bool


@dataclass(frozen=True)
class UpdateConfig(_Part):
    """The policy's update (``training.policy_setup.prepare_policy``, ``training.update``): the
    objective, the loss passes, the optimizer and schedule, LoRA and the reference."""

    # the objective
    beta: float
    eps_low: float
    eps_high: float
    loss_type: LossType
    importance_sampling_level: ImportanceLevel
    is_mode: str  # --is-correction with auto resolved
    is_cap: float
    is_cap_min: float
    bias_corrected_kl: bool
    prompts_per_step: int  # Dr. GRPO's constant P x G x L
    group_size: int
    temperature: float  # the sampling distribution the log-probs are taken under
    top_p: float
    # the loss passes
    num_iterations: int
    gradient_accumulation_steps: int
    micro_batch_tokens: int
    gradient_checkpointing: bool
    packing: Packing
    max_grad_norm: float
    # the policy, its reference and optimizer
    model: str | None
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    learning_rate: float
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    lr_scheduler: LrScheduler
    warmup_steps: int
    steps: int
    cpu_matmul: CpuMatmul


@dataclass(frozen=True)
class EvalConfig(_Part):
    """The held-out evaluation during training (``evaluation.during_training``, and when the
    loop runs it) and what ``eval.json`` records of the run."""

    eval: bool
    eval_every: int
    eval_size: int
    eval_k: int
    eval_rows: int  # --eval-batch-size with 0 resolved
    eval_perturbations: bool
    eval_perturb_size: int
    max_new_tokens: int
    max_episode_tokens: int
    temperature: float
    top_p: float
    tool_role: ToolRole
    score_workers: int
    # eval.json's description of the run
    env: str
    env_kwargs: dict
    model: str | None
    output_dir: str
    seed: int


@dataclass(frozen=True)
class CheckpointConfig(_Part):
    """Where checkpoints go, how often they are written and how many are kept
    (``training.checkpoint``, the loop's saves, ``--resume``)."""

    output_dir: str
    save_every: int
    save_every_minutes: float
    keep_checkpoints: int
    resume: bool
