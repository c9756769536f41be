"""The command that continues a run: ``python -m learner.run`` with the run's own flags (those
that differ from the defaults, ``--output-dir`` always) and ``--resume``, printed when a run
stops early so that a user can paste it."""

from __future__ import annotations

import dataclasses
import json
import shlex

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
