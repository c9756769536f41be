"""The env's recipe applied to a run: which variant (``--env-recipe``: auto picks gpu where a
CUDA device is visible, cpu elsewhere), and which of its settings the user's flags leave to it.

The learner names no pack and knows no domain: the values come from the env's recipe file and
its pack (``learner.recipe_files``). Torch-free, as flag parsing is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args

from learner.choices import EnvRecipe

RECIPE_CHOICES = get_args(EnvRecipe)


def cuda_visible() -> bool:
    """Whether an NVIDIA GPU is visible to this process, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or Path("/dev/nvidia0").exists()


def on_cuda(device: str) -> bool:
    """Whether ``--device`` puts the run on a CUDA GPU (auto: where one is visible)."""
    return cuda_visible() if device == "auto" else device.split(":")[0] == "cuda"


def variant_for(choice: str, device: str = "auto") -> str | None:
    """``--env-recipe`` as a variant name (auto: gpu where ``--device`` is a CUDA GPU), or
    None for off."""
    if choice == "off":
        return None
    if choice == "auto":
        return "gpu" if on_cuda(device) else "cpu"
    return choice


def apply_recipe(env_id: str, choice: str, explicit: dict[str, Any],
                 preset: frozenset[str] = frozenset(), *,
                 device: str = "auto") -> tuple[dict[str, Any],
                                                                dict[str, Any] | None]:
    """The settings the recipe adds under ``explicit`` (the flags and ``--config`` keys the user
    gave) and ``preset`` (what ``--recipe`` decides), and the record of what was applied for
    ``config.json`` (None: no recipe). An env id that is not registered gets no recipe here:
    making the env reports it."""
    import gymnasium as gym

    from learner.recipe_files import recipe_for

    variant = variant_for(choice, device)
    if variant is None:
        return {}, None
    try:
        recipe = recipe_for(env_id, explicit.get("env_kwargs") or {}, variant)
    except gym.error.Error:  # an unknown env id: make_env names the closest one
        return {}, None
    if not recipe.sources:
        return {}, None
    applied = {k: v for k, v in recipe.values.items() if k not in explicit and k not in preset}
    if recipe.env_kwargs != (explicit.get("env_kwargs") or {}):
        applied["env_kwargs"] = recipe.env_kwargs
    record = {"variant": variant, "sources": recipe.sources, "why": recipe.why,
              "applied": applied, "overridden": sorted(k for k in recipe.values if k in explicit),
              "left_to_recipe": sorted(k for k in recipe.values
                                       if k in preset and k not in explicit)}
    return applied, record


def describe(record: dict[str, Any]) -> str:
    """One line saying which recipe a run follows and what it set."""
    applied = record["applied"]
    shown = ", ".join(f"{k}={v}" for k, v in applied.items() if k != "env_kwargs")
    kwargs = applied.get("env_kwargs")
    env = f"env kwargs {kwargs}; " if kwargs else ""
    over = f" (your flags kept: {', '.join(record['overridden'])})" if record["overridden"] else ""
    if record.get("left_to_recipe"):
        over += f" (--recipe sets: {', '.join(record['left_to_recipe'])})"
    return (f"recipe: {' + '.join(record['sources'])}: {env}{shown or 'nothing left to set'}"
            f"{over}")
