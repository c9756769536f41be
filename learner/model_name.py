"""What ``--model`` names, told apart without torch: the embedded default, a local folder, or a
hub id. Kept light so that a path that does not exist is refused before torch loads."""

from __future__ import annotations

from pathlib import Path

#: The embedded default (``learner.model``), also accepted by name.
DEFAULT_MODEL = "SmolLM2-135M-Instruct"


def is_default(name_or_path: str | None) -> bool:
    return name_or_path in (None, "", DEFAULT_MODEL)


def looks_like_path(name: str) -> bool:
    """``/x``, ``./x``, ``~/x``, ``a/b/c``: a folder here; a two-part ``org/model`` is a hub id."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def model_problem(name_or_path: str | None) -> str | None:
    """Why ``--model`` cannot name a model (a local path that does not exist), in one line;
    ``None`` for the default, an existing path or a hub id (the hub is asked later)."""
    if name_or_path is None or is_default(name_or_path) \
            or Path(name_or_path).expanduser().exists():
        return None
    if looks_like_path(name_or_path):
        return f"model path '{name_or_path}' does not exist"
    return None
