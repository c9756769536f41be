"""Registering the built-in envs under ``grpo/`` and third-party ones from ``grpo_gym.envs``.

gymnasium 1.x no longer loads plugins, so ``import envs`` does it: each entry point in the
``grpo_gym.envs`` group names a function that registers envs. A broken one is reported as a
warning naming its distribution; it never breaks the import.
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points

import gymnasium as gym

ENTRY_POINT_GROUP = "grpo_gym.envs"
BUILTIN = {
    "grpo/MathExact-v0": "envs.math_exact:MathExactEnv",
    "grpo/CodeTests-v0": "envs.code_tests:CodeTestsEnv",
    "grpo/JsonSchema-v0": "envs.json_schema:JsonSchemaEnv",
}
_sources: dict[str, str] = {}


class DuplicateEnvError(ValueError):
    pass


def register(env_id: str, entry_point: str, *, source: str = "built-in", **kwargs) -> None:
    """Register ``env_id``; a second registration from another source is an error naming both."""
    if env_id in _sources and _sources[env_id] != source:
        raise DuplicateEnvError(
            f"env id '{env_id}' is registered by both {_sources[env_id]} and {source}"
        )
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
        source = f"distribution {dist}"
        before = set(gym.registry)
        try:
            register_fn = ep.load()
            register_fn()
        except DuplicateEnvError:
            raise
        except Exception as exc:  # noqa: BLE001 - third-party code may raise anything
            warnings.warn(
                f"grpo-gym: ignoring env entry point '{ep.name}' of distribution '{dist}': {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        for env_id in set(gym.registry) - before:
            if env_id in _sources:
                raise DuplicateEnvError(
                    f"env id '{env_id}' is registered by both {_sources[env_id]} and {source}"
                )
            _sources[env_id] = source
