"""Atomic checkpoints through accelerate's save_state (model, optimizer, scheduler, RNG states).

A checkpoint is written into a temporary folder and renamed into place, so a run killed at any
moment (kill -9 included) leaves either the previous checkpoint or the new one, never half.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The layout is shared with the readers of a run folder (evaluation, the command line);
# ``checkpoint.latest`` stays the writers' name for it.
from learner.run_layout import STATE_FILE, checkpoint_dir, latest  # noqa: F401

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
    with _quiet_about_tied_weights(_tied_names(accelerator)):
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


def load(accelerator: Accelerator, path: Path) -> dict[str, Any]:
    """Restore everything ``save`` wrote; returns the trainer state (step, data position, ...)."""
    accelerator.load_state(str(path))
    return json.loads((path / STATE_FILE).read_text())


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
