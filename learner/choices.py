"""The named choices of the GRPO objective, kept free of imports so the command line can check
flags before torch is loaded (``learner.training.grpo`` implements them)."""

SCALE_REWARDS = ("group", "batch", "none")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
IMPORTANCE_LEVELS = ("token", "sequence")
# The engine/trainer mismatch correction (truncated importance sampling), off or at a level.
IS_CORRECTIONS = ("none", "token", "sequence")
CPU_MATMULS = ("onednn", "torch")  # the Linear layers' kernel on CPU (learner.sampling.kernels.onednn_linear)
ROLLOUT_ENGINES = ("auto", "hf", "vllm")  # what samples the completions (learner.sampling.engine)
VLLM_LORA = ("merged", "adapter")  # how a LoRA policy reaches the vLLM engine
# The vLLM engine's weights and arithmetic (auto: bf16 on a GPU, fp32 on CPU).
VLLM_DTYPES = ("auto", "float32", "bfloat16", "float16")
