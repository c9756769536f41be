"""Where a run folder keeps its checkpoints and its record (config.json): training writes them
(``training.checkpoint``, ``launch``), evaluation and the command line read them. Torch-free, so
that the command line finds a checkpoint before anything heavy loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The file a checkpoint is complete with (written last, before the folder is renamed in place).
STATE_FILE = "trainer_state.json"


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def latest(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    root = checkpoint_dir(output_dir)
    if not root.is_dir():
        return None
    done = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


class RecordError(ValueError):
    """A run folder's config.json is not a run's record (one line says why)."""


def read_record(run_dir: str | Path) -> dict[str, Any]:
    """The run's config.json (which must exist); a file that is not JSON, or not an object
    naming the run's env, is a ``RecordError``."""
    path = Path(run_dir) / "config.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path} is not a run's record ({type(exc).__name__}: {exc})") from exc
    if not isinstance(record, dict) or not isinstance(record.get("env"), str):
        raise RecordError(f"{path} is not a run's record (not a JSON object with the run's env)")
    return record
