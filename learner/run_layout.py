"""Where a run folder keeps its checkpoints: training writes them (``training.checkpoint``),
evaluation and the command line read them. Torch-free, so that the command line finds a
checkpoint before anything heavy loads.
"""

from __future__ import annotations

from pathlib import Path

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
