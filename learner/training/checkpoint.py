"""Atomic checkpoints through accelerate's save_state (model, optimizer, scheduler, RNG states).

A checkpoint is written into a temporary folder and renamed into place, so a run killed at any
moment (kill -9 included) leaves either the previous checkpoint or the new one, never half.

What is written is a CPU copy of the weights and optimizer state, and weights are read on the
CPU and copied into the model wherever it lives: safetensors and torch.save read a tensor's
storage, which a lazy-backend tensor does not have (and a GPU's would be copied anyway).
Accelerate's own hooks do it: the save hook may replace the weights it writes, the load hook
may load models itself.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from learner.env_setup import SetupError
from learner.run_layout import STATE_FILE, checkpoint_dir

if TYPE_CHECKING:  # torch-free at import: the command line finds checkpoints before torch loads
    from accelerate import Accelerator


def save(accelerator: Accelerator, output_dir: str | Path, step: int, state: dict[str, Any],
         keep: int = 1) -> Path:
    root = checkpoint_dir(output_dir)
    final = root / f"step-{step:07d}"
    tmp = root / f".tmp-step-{step:07d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    # Model weights as safetensors (tied embeddings are stored once; loading re-ties them).
    with _quiet_about_tied_weights(_tied_names(accelerator)), _written_from_cpu(accelerator):
        accelerator.save_state(str(tmp), safe_serialization=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(json.dumps({"step": step, **state}, indent=1))
        _fsync_dir(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _fsync_dir(root)
        for old in sorted(root.glob("step-*"))[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def remove_all(output_dir: str | Path) -> int:
    """Delete every checkpoint of the run in ``output_dir`` (finished ones and a ``.tmp``
    one cut short); returns the bytes freed."""
    root = checkpoint_dir(output_dir)
    if not root.is_dir():
        return 0
    freed = folder_bytes(root)
    shutil.rmtree(root, ignore_errors=True)
    return freed


def folder_bytes(path: str | Path) -> int:
    """The size of the files under ``path`` (links not followed)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def saved_state(path: Path) -> dict[str, Any]:
    """The trainer state ``save`` wrote in checkpoint ``path``, read without loading it."""
    return json.loads((path / STATE_FILE).read_text())


def load(accelerator: Accelerator, path: Path) -> dict[str, Any]:
    """Restore everything ``save`` wrote; returns the trainer state (step, data position, ...)."""
    handle = accelerator.register_load_state_pre_hook(_load_weights_on_cpu)
    try:
        accelerator.load_state(str(path))
    finally:
        handle.remove()
    return saved_state(path)


def _on_cpu(value: Any, copies: dict[int, Any] | None = None) -> Any:
    """``value`` with every tensor in it copied to the CPU (dicts and lists walked); a tensor
    met twice (tied weights) is copied once, so the copies stay tied."""
    copies = {} if copies is None else copies
    if hasattr(value, "detach") and hasattr(value, "device"):
        if id(value) not in copies:
            copies[id(value)] = value.detach().cpu()
        return copies[id(value)]
    if isinstance(value, dict):  # of its own type: accelerate dedupes an OrderedDict only
        return type(value)((k, _on_cpu(v, copies)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v, copies) for v in value)
    return value


def cpu_state_dict(model: Any) -> dict[str, Any]:
    """``model``'s state dict as CPU copies (tied weights still one tensor): what a writer of
    weights takes, wherever the model lives (``save_pretrained`` cannot read lazy tensors)."""
    return _on_cpu(model.state_dict(keep_vars=True))


def _cpu_weights(models: list, weights: list[dict], output_dir: str) -> None:
    """accelerate's save hook: the weights it writes, as CPU copies, read from the models'
    own parameters where it can (a tied weight is then one tensor, which accelerate writes
    once)."""
    if len(models) == len(weights):
        weights[:] = [_on_cpu(OrderedDict((k, v) for k, v in m.state_dict(keep_vars=True).items()
                                          if k in w))
                      for m, w in zip(models, weights, strict=True)]
    else:
        weights[:] = [_on_cpu(w) for w in weights]


def _cpu_optimizer_state(optimizer: Any, state: dict) -> dict:
    """torch's state_dict hook: the optimizer state as CPU copies (a checkpoint's)."""
    return _on_cpu(state)


@contextlib.contextmanager
def _written_from_cpu(accelerator: Accelerator):
    """While accelerate saves: weights and optimizer state copied to the CPU before writing."""
    handles = [accelerator.register_save_state_pre_hook(_cpu_weights)]
    for opt in getattr(accelerator, "_optimizers", []):
        inner = getattr(opt, "optimizer", opt)  # accelerate's wrapper holds torch's optimizer
        if hasattr(inner, "register_state_dict_post_hook"):  # a torch Optimizer
            handles.append(inner.register_state_dict_post_hook(_cpu_optimizer_state))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class CheckpointMismatch(SetupError):
    """A checkpoint holds another model's tensors than the run's (one line says which)."""


def _load_weights_on_cpu(models: list, input_dir: str) -> None:
    """accelerate's load hook: each model's saved weights read on the CPU and copied into it
    (accelerate would read the model's own tensors' storage, which a lazy tensor lacks); the
    models it leaves in ``models`` are those it still loads itself (none)."""
    from safetensors.torch import load_file

    for i, model in enumerate(models):
        path = Path(input_dir) / ("model.safetensors" if i == 0 else f"model_{i}.safetensors")
        if not path.exists():
            return  # not written by ``save`` (a .bin checkpoint): accelerate loads them all
        state = load_file(str(path), device="cpu")
        missing, unexpected = model.load_state_dict(state, strict=False)
        # A tied weight is stored once: its alias is filled by the tie.
        missing_set = set(missing)
        missing = [k for k in missing if all(a in missing_set for a in _aliases(model, k))]
        if missing or unexpected:
            raise CheckpointMismatch(
                f"--resume: checkpoint {path} does not match the model (missing "
                f"{missing[:3]}, unexpected {unexpected[:3]}): resume with the --model and "
                "--lora-r the run trained")
    models.clear()


def _aliases(model: Any, name: str) -> list[str]:
    """The state dict's names that share ``name``'s tensor (``name`` included)."""
    entries = model.state_dict(keep_vars=True)
    return [k for k, v in entries.items() if v is entries[name]]


#: accelerate's logger and the start of its notice when a safetensors save drops an alias.
SHARED_TENSOR_LOGGER = "accelerate.utils.other"
SHARED_TENSOR_NOTICE = "Removed shared tensor "


class _DropTiedNotice(logging.Filter):
    """Drops accelerate's "Removed shared tensor {...}" notice when every name in it is a
    weight the model ties by design (loading re-ties it, so nothing is lost); a notice naming
    any other tensor still shows."""

    def __init__(self, tied: tuple[str, ...]):
        super().__init__()
        self.tied = tied

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()  # accelerate's adapter may prefix "[RANK n] "
        if SHARED_TENSOR_NOTICE not in text:
            return True
        names_text = text.split(SHARED_TENSOR_NOTICE, 1)[1].split(" while saving")[0]
        try:
            names = ast.literal_eval(names_text)
        except (ValueError, SyntaxError):
            return True
        return not (names and all(_is_tied(str(n), self.tied) for n in names))


def _is_tied(name: str, tied: tuple[str, ...]) -> bool:
    return any(name == key or name.endswith("." + key) for key in tied)


def _tied_names(accelerator: Accelerator) -> tuple[str, ...]:
    """The parameter names the prepared models tie to another (``lm_head.weight`` for a model
    with ``tie_word_embeddings``); a PEFT wrapper prefixes them, so they match as suffixes."""
    tied: list[str] = []
    for model in getattr(accelerator, "_models", []):
        module = accelerator.unwrap_model(model)
        base = module.get_base_model() if hasattr(module, "get_base_model") else module
        config = getattr(base, "config", None)
        if not getattr(config, "tie_word_embeddings", False):
            continue
        keys = getattr(base, "_tied_weights_keys", None) or ()
        tied.extend(keys)
    return tuple(tied)


@contextlib.contextmanager
def _quiet_about_tied_weights(tied: tuple[str, ...]):
    logger = logging.getLogger(SHARED_TENSOR_LOGGER)
    quiet = _DropTiedNotice(tied)  # with nothing tied it drops nothing
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
