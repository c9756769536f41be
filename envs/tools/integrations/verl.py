"""A grpo/* env as verl's custom reward function, and a pack split as the parquet verl reads.

    python -c "from envs.tools.integrations.verl import write_parquet; \\
               write_parquet('grpo/MathExact-v0', 'data/arith-train.parquet', pack='arith', size=1024)"

    # verl config
    data.train_files=data/arith-train.parquet
    custom_reward_function.path=<site-packages>/envs/integrations/verl.py
    custom_reward_function.name=compute_score

Each parquet row carries verl's fields (``data_source``, ``prompt`` as chat messages,
``ability``, ``reward_model.ground_truth``) and, in ``extra_info``, the env id, its keyword
arguments (JSON) and the task id, which ``compute_score`` uses to grade through the env's own
``score``. It returns verl's dict form: ``score`` plus each reward component.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from envs.base import TaskEnv, is_infra_error
from envs.extras import require
from envs.tools.integrations.trl import _env, _first_tasks

__all__ = ["compute_score", "rows", "write_parquet"]

_envs: dict[str, TaskEnv] = {}
_lock = threading.Lock()


def _cached_env(env_id: str, env_kwargs: str) -> TaskEnv:
    key = f"{env_id} {env_kwargs}"
    with _lock:
        if key not in _envs:
            _envs[key] = _env(env_id, **json.loads(env_kwargs))
        return _envs[key]


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """verl's reward-function shape. ``extra_info`` must hold ``task_id`` (and ``env_id`` /
    ``env_kwargs`` unless ``data_source`` is the env id); ``ground_truth`` is informational."""
    extra = extra_info or {}
    if "task_id" not in extra:
        raise ValueError("extra_info has no task_id: write the data with "
                         "envs.tools.integrations.verl.write_parquet")
    env = _cached_env(extra.get("env_id") or data_source, extra.get("env_kwargs") or "{}")
    reward, info = env.score(str(extra["task_id"]), solution_str or "")
    if is_infra_error(info):
        # The grading infrastructure failed: say so rather than score the policy 0.
        raise RuntimeError(f"grading {extra['task_id']} hit a sandbox error: "
                           f"{info['verdict'].details.get('error', '')}")
    return {"score": float(reward), **{k: float(v) for k, v in info["rewards"].items()},
            "reason": info["reason"]}


def rows(env_id: str, split: str = "train", size: int | None = None,
         **env_kwargs: Any) -> list[dict[str, Any]]:
    """verl's row dicts for the first ``size`` tasks of ``split`` (the whole split if None)."""
    env = _env(env_id, split=split, **env_kwargs)
    kwargs = json.dumps(env_kwargs, sort_keys=True)
    out = []
    for i, task in enumerate(_first_tasks(env, split, size)):
        out.append({
            "data_source": env_id,
            "prompt": [{"role": "user", "content": env.prompt(task)}],
            "ability": env.pack.name,
            "reward_model": {"style": "rule", "ground_truth": env.gold_completion(task) or ""},
            "extra_info": {"task_id": task.id, "env_id": env_id, "env_kwargs": kwargs,
                           "split": split, "index": i},
        })
    return out


def write_parquet(env_id: str, path: str | Path, split: str = "train", size: int | None = None,
                  **env_kwargs: Any) -> Path:
    """Write ``rows(...)`` as the parquet file verl's ``data.train_files`` reads."""
    Dataset = require("datasets", "verl", "verl.write_parquet").Dataset

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows(env_id, split, size, **env_kwargs)).to_parquet(str(path))
    return path
