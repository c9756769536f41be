"""A run's ``--output-dir``: the files a run writes there, the refusal of a folder that already
holds something (two runs mixed in one folder once had ``learner.eval --run`` grade the older
model: checkpoints are kept by step number, so the new run's lower-numbered one was deleted), and
the clearing that ``--overwrite`` asks for.

Torch-free, so the check answers before the model loads.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from learner import run_layout

#: Everything a run writes at the top of its folder: ``config.json`` and ``final/`` (launch),
#: ``metrics.jsonl``, ``samples.jsonl`` and ``tensorboard/`` (run_log, with the ``.tmp`` files
#: of a resume cut short), ``checkpoints/`` (checkpoint), ``plots/`` (learner.plot) and the
#: held-out results ``eval.json`` / ``eval_start.json`` (the trainer).
RUN_FILES = ("config.json", "metrics.jsonl", "samples.jsonl", "metrics.jsonl.tmp",
             "samples.jsonl.tmp", "tensorboard", "plots", "final", "checkpoints", "eval.json",
             "eval_start.json")


def _listing(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def output_dir_problem(path: str | Path, *, resume: bool, overwrite: bool) -> str | None:
    """Why a new run cannot start in ``path`` (``None`` when it can): a folder that holds
    anything needs ``--resume`` (continue the run there) or ``--overwrite`` (replace it)."""
    path = Path(path)
    if resume or overwrite or not path.exists():
        return None
    if not path.is_dir():
        return f"--output-dir {path} is a file, not a folder"
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
    if not entries:
        return None
    if (path / "config.json").is_file():
        return (f"--output-dir {path} already holds a run ({_listing(entries)}): pass --resume "
                "to continue it or --overwrite to replace it")
    return (f"--output-dir {path} is not empty ({_listing(entries)}): choose an empty folder, "
            "or pass --overwrite to write the run there (a run's own files are replaced, "
            "nothing else)")


def resume_problem(path: str | Path) -> str | None:
    """Why ``--resume`` cannot continue a run in ``path`` (``None`` when it can, or when the
    folder holds no run: then a new one starts there). A folder with a run's files but no
    checkpoint is refused: starting over would replace its config and logs."""
    path = Path(path)
    if run_layout.latest(path) is not None or not path.is_dir():
        return None
    found = sorted(name + ("/" if (path / name).is_dir() else "") for name in RUN_FILES
                   if (path / name).exists())
    if not found:
        return None
    if (path / "final").is_dir():
        return (f"--resume: the run in {path} finished and kept no checkpoint to continue "
                f"from; its weights are in {path / 'final'}: train further with a new run "
                f"(--model {path / 'final'} --output-dir ANOTHER), or keep the last checkpoint "
                "next time with --keep-final-checkpoint")
    return (f"--resume: {path} holds no checkpoint to continue from (only {_listing(found)}); "
            "pass --overwrite to start the run again there, or choose another --output-dir")


def clear_run(path: str | Path) -> list[str]:
    """Delete what an earlier run left in ``path`` (only ``RUN_FILES``: anything else stays);
    returns the names removed."""
    path = Path(path)
    removed = []
    for name in RUN_FILES:
        target = path / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
            removed.append(name + "/")
        elif target.exists() or target.is_symlink():
            target.unlink()
            removed.append(name)
    return removed
