"""Learner recipes (the schema and reader; the files are the envs' data): the settings an env (and where it matters, a pack) trains well with, as data.

An env names its recipe file (``TaskEnv.recipe_file``, a TOML file with a ``[cpu]`` and a
``[gpu]`` table); a pack may refine it in its ``pack.toml`` (``[recipe.cpu]``,
``[recipe.gpu]``). Each table holds learner settings by their flag names (``RECIPE_KEYS``) and
a ``why``; an env's table may also name ``env_kwargs`` (the pack and level a variant trains
on), used only when the user names no pack. The learner applies a recipe under the user's
flags: an explicit flag or a ``--config`` key always wins.

Torch-free, so the learner reads a recipe before any model loads.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VARIANTS = ("cpu", "gpu")
#: The settings a recipe may set, and their types (the learner's flag names, with ``_``).
RECIPE_KEYS: dict[str, type | tuple[type, ...]] = {
    "steps": int, "prompts_per_step": int, "group_size": int, "max_new_tokens": int,
    "learning_rate": (int, float), "temperature": (int, float), "beta": (int, float),
    "micro_batch_tokens": int, "eval_size": int, "eval_perturbations": bool,
    "sampler": str,
}


class RecipeError(ValueError):
    """A recipe file or table is malformed; the message names the file and the key."""


@dataclass
class Recipe:
    """What a variant of an env's (and its pack's) recipe sets."""

    variant: str
    values: dict[str, Any] = field(default_factory=dict)  # learner settings
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # the env's, as it will be made
    sources: list[str] = field(default_factory=list)  # "file [table]" of each part applied
    why: list[str] = field(default_factory=list)


def check_table(table: Any, origin: str, *, env_kwargs: bool) -> dict[str, Any]:
    """``table`` as a recipe variant, or a ``RecipeError`` naming every problem."""
    if not isinstance(table, dict):
        raise RecipeError(f"{origin}: a recipe variant must be a table")
    problems = []
    for key, value in table.items():
        if key == "why":
            ok = isinstance(value, str)
        elif key == "env_kwargs" and env_kwargs:
            ok = isinstance(value, dict)
        elif key in RECIPE_KEYS:
            typ = RECIPE_KEYS[key]
            ok = isinstance(value, typ) and (typ is bool or not isinstance(value, bool))
        else:
            problems.append(f"unknown key '{key}' (known: {', '.join(RECIPE_KEYS)}, why"
                            f"{', env_kwargs' if env_kwargs else ''})")
            continue
        if not ok:
            problems.append(f"'{key}' has the wrong type ({type(value).__name__})")
    if problems:
        raise RecipeError(f"{origin}: " + "; ".join(problems))
    return dict(table)


def read_file(path: Path) -> dict[str, dict[str, Any]]:
    """The variants of a recipe file, checked."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RecipeError(f"{path}: cannot read the recipe: {exc}") from exc
    unknown = set(raw) - set(VARIANTS)
    if unknown:
        raise RecipeError(f"{path}: unknown tables {sorted(unknown)}; a recipe has "
                          f"{' and '.join(VARIANTS)}")
    return {v: check_table(t, f"{path} [{v}]", env_kwargs=True) for v, t in raw.items()}


def env_class(env_id: str) -> Any:
    """The class registered as ``env_id`` (imports its module, not torch)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import envs  # noqa: F401  (registers the grpo/* envs)

    entry = gym.spec(env_id).entry_point
    return load_env_creator(entry) if isinstance(entry, str) else entry


def recipe_for(env_id: str, env_kwargs: dict[str, Any], variant: str) -> Recipe:
    """The ``variant`` ("cpu" or "gpu") of ``env_id``'s recipe with ``env_kwargs`` given by the
    user: the env's table, then its pack's (the user's pack, else the recipe's, else the env's
    default), each key of the later over the earlier."""
    if variant not in VARIANTS:
        raise RecipeError(f"recipe variant must be one of {VARIANTS}, got {variant!r}")
    cls = env_class(env_id)
    recipe = Recipe(variant, env_kwargs=dict(env_kwargs))
    path = getattr(cls, "recipe_file", None)
    if path is not None:
        table = dict(read_file(Path(path)).get(variant, {}))
        suggested = table.pop("env_kwargs", {})
        if "pack" not in env_kwargs:  # the user's pack is theirs: its options are too
            recipe.env_kwargs = {**suggested, **env_kwargs}
        _add(recipe, table, f"{Path(path).name} [{variant}]")
    pack = recipe.env_kwargs.get("pack") or getattr(cls, "default_pack", "")
    if isinstance(pack, str) and pack:
        from tasks.pack import PackError
        from tasks.registry import pack_sources

        try:
            source = pack_sources().get(pack)
        except PackError:
            source = None  # a broken registry is reported where the env is made
        if source is not None:
            from tasks.pack import Manifest

            manifest = Manifest.read(source.folder)
            if variant in manifest.recipe:
                table = check_table(manifest.recipe[variant],
                                    f"{source.folder / 'pack.toml'} [recipe.{variant}]",
                                    env_kwargs=False)
                _add(recipe, table, f"pack {pack} [recipe.{variant}]")
    return recipe


def _add(recipe: Recipe, table: dict[str, Any], source: str) -> None:
    table = dict(table)
    if why := table.pop("why", None):
        recipe.why.append(why)
    recipe.values.update(table)
    recipe.sources.append(source)
