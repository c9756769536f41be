"""The command that continues a run: ``python -m learner.run`` with the run's own flags (those
that differ from the defaults, ``--output-dir`` always) and ``--resume``, printed when a run
stops early so that a user can paste it."""

from __future__ import annotations

import dataclasses
import json
import shlex
from typing import Any

from learner.checkpoint_bound import recorded, same_value
from learner.config import Config, field_default

#: Flags that say how to start, not what the run is: ``--resume`` replaces them.
_NOT_REPEATED = {"resume", "overwrite", "output_dir"}


def resume_command(config: Config) -> str:
    """``python -m learner.run FLAGS --output-dir DIR --resume``, quoted for a POSIX shell."""
    words = ["python", "-m", "learner.run"]
    for f in dataclasses.fields(Config):
        value = getattr(config, f.name)
        # Internal fields (what a recipe applied, provenance) are records, not flags.
        if f.name in _NOT_REPEATED or f.metadata.get("internal") or value == field_default(f.name):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            words += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    words += ["--output-dir", config.output_dir, "--resume"]
    return shlex.join(words)


#: Flags a resumed run may change without a note: how long it runs (--resume --steps N is how
#: a run trains further; a decaying schedule then stretches to the new end), and what it keeps
#: and shows (checkpoints, samples, plots, the progress bar).
_EXPECTED_ON_RESUME = _NOT_REPEATED | {
    "steps", "progress", "save_every", "save_every_minutes", "keep_checkpoints",
    "keep_final_checkpoint", "samples_every", "samples_groups", "samples_max_mb", "plot_every"}


def changed_on_resume(previous: dict[str, Any], config: Config) -> dict[str, list[Any]]:
    """The flags whose value ``config`` changes from the run's ``config.json`` (``previous``),
    each as ``[earlier, now]`` (JSON's view of both): what a resumed run should say it changed,
    since its config.json records the new values."""
    now = recorded(config)
    changed = {}
    for f in dataclasses.fields(Config):
        if f.name in _EXPECTED_ON_RESUME or f.metadata.get("internal") or f.name not in previous:
            continue
        if not same_value(f.name, previous[f.name], now.get(f.name)):
            changed[f.name] = [previous[f.name], now.get(f.name)]
    return changed
