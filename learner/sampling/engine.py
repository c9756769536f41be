"""Sampling engines: what decodes the policy's continuations for ``rollout`` and ``episodes``.

An engine takes left-padded token-id contexts and returns a ``decoding.Decoded`` (sampled
tokens, their log-probs under the distribution they were drawn from, lengths, why each row
stopped), so single-turn rollouts and multi-turn episodes are built the same way whatever
decodes them. Two implementations:

- ``hf``: ``decoding.decode``, the learner's own loop, on the policy itself (nothing to sync).
- ``vllm``: a colocated vLLM engine (``vllm_engine.VLLMEngine``) that holds its own copy of the
  weights and receives the policy's after every optimizer step.

``--rollout-engine auto`` picks vllm on a CUDA GPU where vLLM is installed, hf elsewhere (on
CPU the learner's loop is the faster of the two; see the README).
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from learner.config import sampling_engine
from learner.sampling.decoding import Decoded, Stop, decode, eos_ids
from learner.sampling.kernels.onednn_linear import packed_weights
from learner.stage_config import EngineConfig


class SamplingEngine(Protocol):
    """Decodes continuations of token-id contexts; see ``decoding.decode`` for the arguments."""

    name: str

    @property
    def device(self) -> torch.device: ...

    def eos_ids(self, tokenizer: PreTrainedTokenizerBase) -> Tensor: ...

    def session(self) -> contextlib.AbstractContextManager[Any]:
        """Held around a batch of ``decode`` calls (a step's rollout, an episode's turns)."""
        ...

    def decode(self, ids: Tensor, mask: Tensor, *, budgets: Tensor, eos: Tensor, pad_id: int,
               repeat: int = 1, temperature: float = 1.0, top_p: float = 1.0,
               greedy: bool = False, stop: Stop | None = None,
               compact_fraction: float = 0.25, max_rows: int = 0) -> Decoded: ...


class HFEngine:
    """The learner's own decoding loop on ``model`` (exactly what ran before engines existed)."""

    name = "hf"

    def __init__(self, model: PreTrainedModel):
        self.model = model

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def eos_ids(self, tokenizer: PreTrainedTokenizerBase) -> Tensor:
        return eos_ids(self.model, tokenizer)

    def session(self) -> contextlib.AbstractContextManager[Any]:
        # The weights are packed for oneDNN once for all the calls (onednn_linear).
        return packed_weights(self.model)

    def decode(self, ids: Tensor, mask: Tensor, **kwargs: Any) -> Decoded:
        return decode(self.model, ids, mask, **kwargs)


def engine_name(choice: str, device: torch.device) -> str:
    """``--rollout-engine`` on ``device`` (``config.sampling_engine`` decides)."""
    return sampling_engine(choice, device.type)


class SyncedEngine(SamplingEngine, Protocol):
    """An engine with its own copy of the weights (vLLM): loaded after every optimizer step.

    ``seed_requests``: a seed per request (a draw on a background thread needs it) rather than
    the engine's one generator; ``sleep`` frees its memory while the trainer updates (a no-op
    where it does not sleep), and the next ``sync`` or ``decode`` wakes it."""

    seed_requests: bool

    def sync(self, policy: torch.nn.Module, gather: Any = None) -> None: ...

    def sleep(self) -> None: ...

    def close(self) -> None: ...


def build_engine(config: EngineConfig, device: torch.device, *, rank: int = 0,
                 processes: int = 1, size: Any = None) -> SyncedEngine | None:
    """The engine ``config.rollout_engine`` names, or None for hf (the learner's loop runs on
    the policy itself, with its full weights gathered under ZeRO-3, each round). ``size``:
    the ``vllm_sizing.EngineSize`` derived from the step (None: the flags as they are)."""
    if engine_name(config.rollout_engine, device) == "hf":
        return None
    from learner.model import resolve
    from learner.sampling.vllm_engine import VLLMEngine

    share = config.vllm_gpu_memory_utilization or 0.3
    max_len, seqs = config.vllm_max_model_len or None, config.vllm_max_num_seqs or None
    if size is not None:
        share, max_len, seqs = size.gpu_memory_utilization, size.max_model_len, size.max_num_seqs
    return VLLMEngine(resolve(config.model), device=device, seed=config.seed + rank,
                      dtype=None if config.vllm_dtype == "auto" else config.vllm_dtype,
                      gpu_memory_utilization=share, max_model_len=max_len, max_num_seqs=seqs,
                      lora=config.vllm_lora, lora_rank=config.lora_r, processes=processes,
                      # A draw on the background thread runs beside the update: sleeping,
                      # the engine would be woken mid-update; its order against the
                      # update's draws is not fixed, so each request carries its seed.
                      sleep=config.vllm_sleep and not config.async_steps,
                      seed_requests=bool(config.async_steps))
