"""The vLLM engine's size, derived from the step when the user did not set it: the longest
sequence it holds (``max_model_len``), the rows it decodes at once (``max_num_seqs``) and the
share of the GPU it takes (``gpu_memory_utilization``), from P x G, the prompt and completion
lengths and the memory plan (``memory_plan.estimate``: the KV cache and logits of the rows).

Why derive them: vLLM's defaults are the model's whole context (32k-128k tokens, whose one
sequence the KV cache must hold, or the engine refuses to start) and a fixed share of the
card (which either starves the trainer or leaves the engine more cache than a step can use).
A step needs exactly its rows: P x G per process, each of at most prompt + T tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from learner.env_setup import SetupError
from learner.stage_config import EngineConfig
from learner.training import memory_plan

#: The most rows derived for one engine: vLLM captures CUDA graphs up to max_num_seqs, and
#: beyond ~1k rows a decode step is compute-bound anyway.
MAX_NUM_SEQS = 1024
#: max_model_len is a multiple of this (vLLM's KV blocks are 16 tokens).
LEN_STEP = 256
#: What vLLM holds besides weights and KV cache: the profile run's activations, CUDA graphs,
#: the sampler's buffers and the CUDA context's non-torch memory (about 1-2 GB at 0.5-1.5B).
ENGINE_OVERHEAD_BYTES = 2.0e9
#: Headroom on the KV cache and logits (block rounding, prefix blocks, the plan's error).
KV_MARGIN = 1.2
#: The range a derived share is kept in.
MIN_SHARE, MAX_SHARE = 0.05, 0.9


@dataclass(frozen=True)
class EngineSize:
    """What the engine is started with, and which of the three were derived (the rest the
    user set; ``None`` max_model_len: the model's context length)."""

    max_model_len: int | None
    max_num_seqs: int
    gpu_memory_utilization: float
    derived: tuple[str, ...]
    prompt_tokens: int = 0  # the longest prompt seen (of the train split's first 16)
    completion_tokens: int = 0  # T, the completion budget L of a step
    rows: int = 0  # a step's rows on this process
    need_bytes: float = 0.0  # what the share was derived from (0: not derived)
    card_bytes: float = 0.0  # the GPU's memory (0: not a GPU)

    def record(self) -> dict[str, Any]:
        """For config.json's provenance."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def line(self) -> str:
        """One line saying what the engine was sized to, and from what."""
        gb = 1e9
        parts = [
            f"max_model_len {self.max_model_len or 'the model context'}"
            + (f" (2 x longest prompt {self.prompt_tokens} + T {self.completion_tokens})"
               if "max_model_len" in self.derived and self.max_model_len else ""),
            f"max_num_seqs {self.max_num_seqs}"
            + (f" (a step's {self.rows} rows)" if "max_num_seqs" in self.derived else ""),
        ]
        if self.card_bytes:
            parts.append(f"gpu_memory_utilization {self.gpu_memory_utilization:.2f}" + (
                f" ({self.need_bytes / gb:.1f} of {self.card_bytes / gb:.0f} GB: weights, KV "
                "cache and logits of the step's rows, engine overhead)"
                if "gpu_memory_utilization" in self.derived else ""))
        said = "derived from the step" if self.derived else "as set"
        return f"vLLM engine sized ({said}): " + ", ".join(parts)


def context_len(prompt_tokens: int, completion_tokens: int, model_limit: int | None) -> int:
    """The derived ``max_model_len``: twice the longest prompt seen (a longer one may come
    later in the split) plus the completion budget, rounded up to ``LEN_STEP``, at most the
    model's own context length."""
    n = math.ceil((2 * prompt_tokens + completion_tokens) / LEN_STEP) * LEN_STEP
    return min(n, model_limit) if model_limit else n


def num_seqs(prompts_per_step: int, group_size: int, world: int) -> int:
    """The derived ``max_num_seqs``: the rows one process samples in a round (its round-robin
    share of P prompts, G rows each; ``distributed.Processes.local``), at most
    ``MAX_NUM_SEQS``."""
    return max(1, min(math.ceil(prompts_per_step / max(world, 1)) * group_size, MAX_NUM_SEQS))


def memory_share(model_config: Any, *, params: int, rows: int, context: int,
                 max_model_len: int | None, weight_bytes: int, card_bytes: float
                 ) -> tuple[float, float]:
    """The derived ``gpu_memory_utilization`` and the bytes it stands for: the engine's
    weights (``params`` x ``weight_bytes``), the KV cache and logits of ``rows`` rows of
    ``context`` tokens plus one of ``max_model_len`` (vLLM checks at start that one fits),
    as the memory plan counts them in the engine's precision, with ``KV_MARGIN``, and
    ``ENGINE_OVERHEAD_BYTES``; as a share of ``card_bytes``, rounded up to 0.01."""
    def sampling(n: int, tokens: int) -> float:
        return memory_plan.estimate(
            model_config, trainable=0, total=params, reference=False, rows=n, context=tokens,
            micro_batch_tokens=1, bytes_per_float=weight_bytes).sampling

    kv = sampling(rows, context) + (sampling(1, max_model_len) if max_model_len else 0.0)
    need = params * weight_bytes + KV_MARGIN * kv + ENGINE_OVERHEAD_BYTES
    share = math.ceil(100 * need / card_bytes) / 100
    return min(max(share, MIN_SHARE), MAX_SHARE), need


def size_engine(c: EngineConfig, model_config: Any, *, params: int, prompt_tokens: int,
                completion_tokens: int, world: int, multi_turn: bool,
                card_bytes: float = 0.0, weight_bytes: int = 2) -> EngineSize:
    """The engine's size for its part of the config, ``c`` (``vllm_max_model_len``,
    ``vllm_max_num_seqs``, ``vllm_gpu_memory_utilization``: 0 derives each); ``card_bytes``:
    the GPU's memory (0 on CPU, where the share is not used); ``multi_turn``: episodes grow by
    tool outputs of no known bound, so there the model's context length stays."""
    derived = []
    model_limit = getattr(model_config, "max_position_embeddings", None)
    max_len: int | None = c.vllm_max_model_len or None
    if max_len is None and not multi_turn:
        max_len = context_len(prompt_tokens, completion_tokens, model_limit)
        derived.append("max_model_len")
    elif max_len is not None and not multi_turn and max_len < prompt_tokens + completion_tokens:
        # Said before the engine starts (half a minute), not at step 1's decode.
        raise SetupError(f"--vllm-max-model-len {max_len} is under the longest prompt seen "
                         f"({prompt_tokens} tokens) plus --max-new-tokens {completion_tokens}: "
                         f"give {prompt_tokens + completion_tokens} or more, or 0 to derive it "
                         "from the step")
    rows = num_seqs(c.prompts_per_step, c.group_size, world)
    seqs = c.vllm_max_num_seqs
    if not seqs:
        seqs = rows
        derived.append("max_num_seqs")
    share, need = c.vllm_gpu_memory_utilization, 0.0
    if card_bytes and not share:
        share, need = memory_share(
            model_config, params=params, rows=min(rows, seqs),
            context=prompt_tokens + completion_tokens,
            max_model_len=max_len or model_limit, weight_bytes=weight_bytes,
            card_bytes=card_bytes)
        derived.append("gpu_memory_utilization")
    return EngineSize(max_len, seqs, share or 0.3, tuple(derived), prompt_tokens,
                      completion_tokens, rows, need, card_bytes)


def longest_prompt(env: Any, tokenizer: Any, n: int = 16) -> int:
    """Tokens of the longest chat-formatted prompt among the train split's first ``n`` tasks
    (as ``memory_plan.check`` measures them)."""
    from learner.model import chat_prompt

    size = env.pack.size("train")  # None: a procedural pack's unbounded stream
    prompts = [env.prompt(env.pack.task_at("train", i))
               for i in range(n if size is None else min(n, size))]
    return max((len(tokenizer(chat_prompt(tokenizer, p))["input_ids"]) for p in prompts),
               default=0)
