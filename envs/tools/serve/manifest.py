"""``openenv.yaml`` for a served env and pack: the reward range and, from the report card
(``envs/tools/card``), the tolerances it holds the env to.

``oracle_tolerance`` is the card's: a gold earns the maximum within ``ORACLE_TOLERANCE`` of it.
``floor_margin`` is the gap the card guarantees between the maximum and a do-nothing policy,
whose mean may reach at most ``FLOOR_MAX`` of it. Both are fractions of the maximum in the card,
so here they are scaled by the env's maximum reward. The card's last committed results for the
pack (``envs/tools/card/baseline.json``) ride along under ``grpo_gym.report_card``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from envs.base import TaskEnv, max_reward
from envs.tools.card.checks import FLOOR_MAX, ORACLE_TOLERANCE

BASELINE = Path(__file__).resolve().parents[1] / "card" / "baseline.json"
EPISODE_TIMEOUT_S = 120.0


def reward_range(env: TaskEnv) -> tuple[float, float]:
    """The lowest and highest total reward: negatively weighted components at 1, or every
    positively weighted one at 1."""
    low = sum(w for w in env.reward_weights.values() if w < 0)
    return float(low), float(max_reward(env))


def manifest(env: TaskEnv, *, port: int = 8000) -> dict[str, Any]:
    """The ``openenv.yaml`` document for ``env`` (made with ``gym.make``)."""
    spec = env.spec
    env_id = spec.id if spec is not None else env.env_id
    env_kwargs = {k: v for k, v in (dict(spec.kwargs) if spec is not None else {}).items()
                  if _plain(v)}
    low, high = reward_range(env)
    card = _baseline().get(f"{env_id}|{env.pack.name}", {}).get("checks", {})
    serve = f"python -m envs serve {env_id} --pack {env.pack.name} --port {port}"
    extra = {k: v for k, v in env_kwargs.items() if k != "pack"}
    if extra:
        serve += f" --env-kwargs '{json.dumps(extra, sort_keys=True)}'"
    tags = ["grpo-gym", env_id.split("/")[-1], env.pack.name]
    if env.tool is not None:
        tags.append("tool-use")
    return {
        "spec_version": 1,
        "name": f"{env_id.split('/')[-1]}-{env.pack.name}".lower(),
        "version": str(env.pack.pack_version),
        "type": "space",
        "runtime": "fastapi",
        "port": port,
        "validation": {
            "reward": {
                "range": [low, high],
                "oracle_tolerance": round(ORACLE_TOLERANCE * high, 6),
                "floor_margin": round((1 - FLOOR_MAX) * high, 6),
            },
            "resources": {"cpu": 1.0, "memory_mb": 2048, "disk_mb": 1024,
                          "episode_timeout_s": EPISODE_TIMEOUT_S},
            "capabilities": {"verifier": {"kind": "reward_channel"}},
            "types": {"tags": tags},
        },
        "grpo_gym": {
            "env_id": env_id,
            "pack": env.pack.name,
            "env_kwargs": env_kwargs,
            "serve": serve,
            "reward_weights": dict(env.reward_weights),
            "report_card": {check: result.get("status") for check, result in sorted(card.items())},
        },
    }


def write_manifest(folder: Path, env: TaskEnv, *, port: int = 8000) -> Path:
    """Write ``folder/openenv.yaml`` for ``env``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "openenv.yaml"
    path.write_text(yaml.safe_dump(manifest(env, port=port), sort_keys=False), encoding="utf-8")
    return path


def _plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


def _baseline() -> dict[str, Any]:
    try:
        return json.loads(BASELINE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
