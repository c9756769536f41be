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
import importlib.util
from typing import Any, Protocol

import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from learner.config import Config
from learner.sampling.decoding import Decoded, Stop, decode, eos_ids
from learner.sampling.kernels.onednn_linear import packed_weights


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


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def engine_name(choice: str, device: torch.device) -> str:
    """``--rollout-engine``: auto is vllm on a CUDA device where vLLM is installed, else hf."""
    if choice != "auto":
        return choice
    return "vllm" if device.type == "cuda" and vllm_installed() else "hf"


class SyncedEngine(SamplingEngine, Protocol):
    """An engine with its own copy of the weights (vLLM): loaded after every optimizer step."""

    def sync(self, policy: torch.nn.Module) -> None: ...

    def close(self) -> None: ...


def build_engine(config: Config, device: torch.device, *, rank: int = 0,
                 processes: int = 1) -> SyncedEngine | None:
    """The engine ``config.rollout_engine`` names, or None for hf (the learner's loop runs on
    the policy itself, with its full weights gathered under ZeRO-3, each round)."""
    if engine_name(config.rollout_engine, device) == "hf":
        return None
    from learner.model import resolve
    from learner.sampling.vllm_engine import VLLMEngine

    return VLLMEngine(resolve(config.model), device=device, seed=config.seed + rank,
                      dtype=None if config.vllm_dtype == "auto" else config.vllm_dtype,
                      gpu_memory_utilization=config.vllm_gpu_memory_utilization,
                      max_model_len=config.vllm_max_model_len or None, lora=config.vllm_lora,
                      lora_rank=config.lora_r, processes=processes)
