"""Policies from training runs, for evaluation: the env a run trained on (with the flags'
departures from it noted), and its latest checkpoint's weights (safetensors, a pickled state
dict or DeepSpeed's ZeRO shards), LoRA adapters merged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from learner.model import DEFAULT_MODEL, load_model, with_lora
from learner.run_layout import RecordError, read_record
from learner.run_layout import latest as latest_checkpoint


class RunDirError(RuntimeError):
    """A ``--run`` folder has no config or no weights to evaluate."""


def run_config(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise RunDirError(f"{run_dir} is not a training run: it has no config.json")
    try:
        return read_record(run_dir)
    except RecordError as exc:
        raise RunDirError(str(exc)) from exc


def run_env(config: dict[str, Any], env: str | None, env_kwargs: dict[str, Any]
            ) -> tuple[str, dict[str, Any], list[str]]:
    """The env a run is evaluated on: the run's own env and kwargs, with ``--env`` /
    ``--env-kwargs`` applied on top, and a note for each way the flags depart from the run (a
    run must not be scored on another task than it trained on without a word)."""
    run_id, run_kwargs = config["env"], dict(config.get("env_kwargs") or {})
    env_id = env or run_id
    notes = []
    if env_id != run_id:
        notes.append(f"--env {env_id} is not the env the run trained on ({run_id} with "
                     f"{json.dumps(run_kwargs)}); evaluating {env_id} with "
                     f"{json.dumps(env_kwargs)}")
        return env_id, dict(env_kwargs), notes
    changed = {k: v for k, v in env_kwargs.items() if run_kwargs.get(k, _MISSING) != v}
    kwargs = {**run_kwargs, **env_kwargs}
    if changed:
        notes.append(f"--env-kwargs {json.dumps(changed)} differ from the run's "
                     f"{json.dumps(run_kwargs)}; evaluating {env_id} with {json.dumps(kwargs)}")
    return env_id, kwargs, notes


_MISSING = object()


def _checkpoint_weights(path: Path) -> dict[str, torch.Tensor]:
    """The model state dict that accelerate's ``save_state`` wrote into a checkpoint folder:
    safetensors, a pickled state dict, or DeepSpeed's ZeRO shards (consolidated here)."""
    safe, pickled = path / "model.safetensors", path / "pytorch_model.bin"
    if (path / "pytorch_model").is_dir():  # DeepSpeed's tag folder: one shard per process
        try:
            from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        except ImportError as exc:
            raise RunDirError(
                f"{path} is a DeepSpeed checkpoint: reading its shards needs deepspeed "
                f"(pip install -e '.[deepspeed]'), or evaluate the saved model with --model "
                f"{path.parent.parent / 'final'}") from exc
        return get_fp32_state_dict_from_zero_checkpoint(str(path), tag="pytorch_model")
    if safe.is_file():
        from safetensors.torch import load_file

        return load_file(str(safe))
    if pickled.is_file():
        return torch.load(pickled, map_location="cpu", weights_only=True)
    raise RunDirError(f"{path} holds no model weights (model.safetensors / pytorch_model.bin)")


def load_run_policy(run_dir: str | Path) -> tuple[PreTrainedModel, str]:
    """The policy of the run's latest checkpoint (LoRA adapters merged), and where it came from.

    Falls back to ``final/`` (the trainer's ``save_model``) when no checkpoint is left.
    """
    run = Path(run_dir)
    config = run_config(run)
    latest = latest_checkpoint(run)
    if latest is None:
        final = run / "final"
        if (final / "config.json").is_file():
            return load_model(str(final)), str(final)
        raise RunDirError(f"{run} has no complete checkpoint and no final/ model")
    model: Any = load_model(config.get("model"))  # a PeftModel under LoRA
    if config.get("lora_r"):
        model = with_lora(model, config["lora_r"], config.get("lora_alpha", 16),
                          config.get("lora_dropout", 0.0))
    missing, unexpected = model.load_state_dict(_checkpoint_weights(latest), strict=False)
    # safetensors stores tied weights once (the output layer shares the input embedding)
    tied = {k for k in missing if k.endswith("lm_head.weight")} \
        if model.config.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise RunDirError(f"{latest} does not match {config.get('model') or DEFAULT_MODEL}: "
                          f"missing {sorted(set(missing) - tied)[:5]}, "
                          f"unexpected {sorted(unexpected)[:5]}")
    model.tie_weights()
    if config.get("lora_r"):
        model = model.merge_and_unload()
    return model, str(latest)
