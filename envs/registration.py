"""Registering the built-in envs under ``grpo/`` and third-party ones from ``grpo_gym.envs``.

gymnasium 1.x no longer loads plugins, so ``import envs`` does it: each entry point in the
``grpo_gym.envs`` group names a function that registers envs (through ``envs.register`` or
``gymnasium.register``). A broken one is reported as a warning naming its distribution; it
never breaks the import. An env id registered twice (a third-party id that is already taken)
is a ``DuplicateEnvError`` naming both sources: ``gymnasium.register`` would silently replace
the first registration, so the registry is compared before and after each entry point runs.
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

ENTRY_POINT_GROUP = "grpo_gym.envs"
BUILTIN = {
    "grpo/MathExact-v0": "envs.domains.math_exact:MathExactEnv",
    "grpo/CodeTests-v0": "envs.domains.code_tests:CodeTestsEnv",
    "grpo/JsonSchema-v0": "envs.domains.json_schema:JsonSchemaEnv",
    "grpo/MathPython-v0": "envs.domains.math_python:MathPythonEnv",
    "grpo/OpenEnv-v0": "envs.domains.openenv_client.env:OpenEnvEnv",
    "grpo/ReasoningGym-v0": "envs.domains.reasoning_gym.env:ReasoningGymEnv",
}
_sources: dict[str, str] = {}
# The distribution whose entry point is running: ``register`` calls made by it are its own.
_running: str | None = None


class DuplicateEnvError(ValueError):
    pass


def register(env_id: str, entry_point: str, *, source: str | None = None, **kwargs) -> None:
    """Register ``env_id``; a second registration from another source is an error naming both.

    ``source`` defaults to the distribution whose entry point is running, else "built-in".
    """
    source = source or _running or "built-in"
    owner = _sources.get(env_id)
    if owner is None and env_id in gym.registry:
        owner = f"an earlier registration ({gym.registry[env_id].entry_point})"
    if owner is not None and owner != source:
        raise DuplicateEnvError(f"env id '{env_id}' is registered by both {owner} and {source}")
    _sources[env_id] = source
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True, **kwargs)


def env_sources() -> dict[str, str]:
    """Where each grpo-gym env id came from ("built-in" or "distribution <name>")."""
    return dict(_sources)


def register_all() -> None:
    for env_id, entry_point in BUILTIN.items():
        register(env_id, entry_point)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else "?"
        _run_entry_point(ep, f"distribution {dist}", dist)


def _run_entry_point(ep: Any, source: str, dist: str) -> None:
    global _running
    before = dict(gym.registry)
    _running = source
    try:
        ep.load()()
    except DuplicateEnvError:
        _restore(before)
        raise
    except Exception as exc:  # noqa: BLE001 - third-party code may raise anything
        _restore(before)
        warnings.warn(
            f"grpo-gym: ignoring env entry point '{ep.name}' of distribution '{dist}': {exc}",
            RuntimeWarning,
            stacklevel=3,
        )
        return
    finally:
        _running = None
    for env_id, spec in gym.registry.items():
        old = before.get(env_id)
        if spec is old:
            continue
        owner = _sources.get(env_id)
        if old is not None and owner != source:
            _restore(before)
            first = owner or f"an earlier registration ({old.entry_point})"
            raise DuplicateEnvError(
                f"env id '{env_id}' is registered by both {first} and {source}"
            )
        _sources[env_id] = source


def _restore(snapshot: dict[str, Any]) -> None:
    """Undo an entry point's registrations: a broken or clashing plugin leaves no trace."""
    for env_id in set(gym.registry) - set(snapshot):
        del gym.registry[env_id]
        _sources.pop(env_id, None)
    gym.registry.update(snapshot)
