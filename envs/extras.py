"""Optional dependencies: an import that names the extra (and its pip command) when missing.

``datasets`` (the trl and verl extras), ``trl``, ``openenv``, ``ray`` and ``reasoning-gym`` are
not part of the core install; a bare ``ModuleNotFoundError: No module named 'datasets'`` says
neither why it is needed nor how to get it.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message is one line with the pip command.
    A ``ModuleNotFoundError``, so code that catches the plain one still does."""


def install_hint(extra: str) -> str:
    return f'pip install -e ".[{extra}]"'


def require(module: str, extra: str, what: str) -> ModuleType:
    """``import module``, or a ``MissingExtraError`` saying that ``what`` needs ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"{what} needs the {extra} extra ({module} is not installed): "
                                f"{install_hint(extra)}", name=module) from exc
