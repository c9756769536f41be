"""What a run was made with, beyond its flags: the package versions and the project's git commit
(``config.json``'s ``provenance``, learner.eval's report). On CPU "same seed, same run" also
needs the thread count, which the trainer decides and ``launch`` records.

Torch-free: nothing here imports what it describes.
"""

from __future__ import annotations

import contextlib
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

#: Distributions whose versions change a run's numbers; those not installed are left out.
PACKAGES = ("grpo-gym", "torch", "transformers", "accelerate", "peft", "trl", "deepspeed", "ray",
            "vllm")

#: The project's root: the folder holding ``learner/``.
ROOT = Path(__file__).resolve().parents[1]


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Distribution name -> installed version, for those of ``names`` that are installed."""
    out = {}
    for name in names:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):  # no git, or it hung
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(root: Path = ROOT) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git checkout at ``root``; ``None`` when
    ``root`` is not the top of a checkout (an installed copy, or one inside another project's
    repository, whose commit would say nothing about this code). ``dirty``: tracked files
    differ from the commit (untracked ones, such as run folders, do not count)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root.resolve():
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:  # a repository without a commit yet
        return None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def provenance(cpu_threads: int, device: str, processes: int) -> dict[str, Any]:
    """The ``provenance`` section of a run's ``config.json``."""
    out: dict[str, Any] = {
        "cpu_threads": cpu_threads,  # torch's intra-op threads, per process
        "device": device,
        "processes": processes,
        "python": platform.python_version(),
        "versions": package_versions(),
    }
    git = git_state()
    if git is not None:
        out["git"] = git
    return out
