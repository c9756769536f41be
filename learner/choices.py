"""The named choices of the GRPO objective and the run's other closed sets, kept free of imports
so the command line can check flags before torch is loaded (``learner.training.grpo`` implements
the objective's). Each is a ``Literal`` type, which ``learner.config`` annotates its fields with
(the flags' choices are read from the types), and the tuple of its values.
"""

from typing import Literal, get_args

ScaleRewards = Literal["group", "batch", "none"]
# cispo: MiniMax-M1's objective (the clipped weight, detached, times A times log-prob), with
# dapo's aggregation (the token mean over the step), as TRL's loss_type="cispo".
LossType = Literal["grpo", "dr_grpo", "dapo", "cispo"]
ImportanceLevel = Literal["token", "sequence"]
# The engine/trainer mismatch correction (importance sampling): auto (sequence_mask where the
# engine is vLLM, as TRL defaults, else none), off, truncated at a level (token, sequence: the
# weight clamped into [--is-cap-min, --is-cap]) or masked (token_mask, sequence_mask: a weight
# outside that range is 0, as TRL's *_mask modes).
ISCorrection = Literal["auto", "none", "token", "sequence", "token_mask", "sequence_mask"]
CpuMatmul = Literal["onednn", "torch"]  # the Linear layers' kernel on CPU (sampling.kernels)
RolloutEngine = Literal["auto", "hf", "vllm"]  # what samples the completions (sampling.engine)
VllmLora = Literal["merged", "adapter"]  # how a LoRA policy reaches the vLLM engine
# The vLLM engine's weights and arithmetic (auto: bf16 on a GPU, fp32 on CPU).
VllmDtype = Literal["auto", "float32", "bfloat16", "float16"]
# Dynamic sampling keeps a group when this differs within it: the env's correctness (passed,
# as DAPO filters on accuracy) or the shaped reward trained on.
DynamicSamplingMetric = Literal["accuracy", "reward"]
# --recipe: one paper's hyper-parameters together (learner.presets); unset: the flags alone.
AlgorithmRecipe = Literal["grpo", "dapo", "dr_grpo", "gspo", "cispo"]
# How named reward components become one advantage: the weighted sum normalised within the group
# (GRPO), or each component normalised within the group, then the weighted sum, normalised over
# the batch (GDPO; TRL's multi_objective_aggregation="normalize_then_sum").
RewardNorm = Literal["sum_then_normalize", "normalize_then_sum"]
EnvRecipe = Literal["auto", "cpu", "gpu", "off"]  # --env-recipe (learner.recipe)
ToolRole = Literal["auto", "tool", "ipython", "user"]
LrScheduler = Literal["constant", "cosine"]
AsyncSteps = Literal[0, 1]
# --autocast: bf16 autocast of the loss and reference passes (auto: on a CUDA GPU only).
Autocast = Literal["auto", "bf16", "off"]
# --packing: a loss pass's rows as one packed sequence without padding (auto: where the model's
# attention takes variable lengths without a mask, flash attention; learner.training.forward).
Packing = Literal["auto", "on", "off"]
# --sampler: which train tasks a step draws (learner.training.task_sampler).
TaskSamplerName = Literal["sequential", "uniform", "curriculum"]

SCALE_REWARDS = get_args(ScaleRewards)
LOSS_TYPES = get_args(LossType)
REWARD_NORMS = get_args(RewardNorm)
IMPORTANCE_LEVELS = get_args(ImportanceLevel)
IS_CORRECTIONS = get_args(ISCorrection)
IS_MODES = IS_CORRECTIONS[2:]  # what auto and none leave: the modes that weight the loss
CPU_MATMULS = get_args(CpuMatmul)
ROLLOUT_ENGINES = get_args(RolloutEngine)
VLLM_LORA = get_args(VllmLora)
VLLM_DTYPES = get_args(VllmDtype)
DYNAMIC_SAMPLING_METRICS = get_args(DynamicSamplingMetric)
ALGORITHM_RECIPES = get_args(AlgorithmRecipe)
AUTOCASTS = get_args(Autocast)
PACKINGS = get_args(Packing)
