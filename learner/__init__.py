"""The bundled GRPO learner: ``python -m learner.run`` trains a causal LM on any grpo/* env.

By stage: ``sampling`` (completions and their grades), ``training`` (``GRPOTrainer``: advantages,
the loss passes, the optimizer), ``evaluation`` (held-out accuracy and the gates report); the
entry points ``run``, ``eval``, ``plot`` and ``demo`` share their set-up in ``launch``.

The learner's dependencies are the ``learner`` extra (``pip install "grpo-gym[learner]"``); the
core install (the envs, verifiers and sandbox) has none of them. Without them, importing the
learner's modules fails at once with one line that says so, rather than with torch's bare
``ModuleNotFoundError`` from somewhere inside (``model_files``, which set-up runs in a fresh
venv, needs only the standard library).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

#: The top-level modules of the learner extra (pyproject.toml's ``learner`` list).
EXTRA_MODULES = ("torch", "transformers", "accelerate", "peft", "safetensors", "gguf", "tqdm",
                 "matplotlib", "psutil")
INSTALL_HINT = 'pip install "grpo-gym[learner]"'


def missing_modules() -> list[str]:
    """The learner extra's modules that are not installed (looked up, not imported)."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # e.g. sys.modules[name] = None
            found = False
        if not found:
            missing.append(name)
    return missing


class _NeedsTheExtra(importlib.abc.MetaPathFinder):
    """Refuses, in one line, an import of a learner module while the extra is missing.
    ``STDLIB_ONLY`` modules stay importable: set-up fetches the model with them into a fresh
    venv."""

    def __init__(self, message: str, missing: str):
        self.message, self.missing = message, missing

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if not name.startswith(f"{__name__}.") or name in STDLIB_ONLY:
            return None
        if sys.argv[:1] == ["-m"]:  # `python -m learner.X`: the one line, without a traceback
            raise SystemExit(f"learner: {self.message}")
        try:
            from envs.extras import MissingExtraError
        except ImportError:  # not even the core: the plain error, with the same line
            raise ModuleNotFoundError(self.message, name=self.missing) from None
        raise MissingExtraError(self.message, name=self.missing)


#: Learner modules that need none of the extra: ``model_files`` (the standard library and pip)
#: and ``recipe_files`` (the recipe schema, which ``python -m envs validate`` in the core
#: install checks a pack's ``[recipe.*]`` tables against).
STDLIB_ONLY = frozenset({f"{__name__}.model_files", f"{__name__}.recipe_files"})

if _missing := missing_modules():
    _what = _missing[0] + (f" and {len(_missing) - 1} more" if len(_missing) > 1 else "")
    _message = (f"the learner needs the learner extra ({_what} not installed): {INSTALL_HINT} "
                '(in a clone: pip install -e ".[learner]")')
    sys.meta_path.insert(0, _NeedsTheExtra(_message, _missing[0]))
