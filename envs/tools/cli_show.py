"""``python -m envs show ENV --pack P --n 3``: sample prompts and their golds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

import envs  # noqa: F401 - registers the envs
from envs.base import make_task_env
from tasks.pack import Manifest, PackError, template_fields
from tasks.registry import pack_sources

MAX_FIELD_CHARS = 600


def parse_options(options: Sequence[str]) -> dict[str, Any]:
    """``["level=1"]`` -> ``{"level": 1}`` (values are JSON when they parse, else strings)."""
    parsed = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"an option is KEY=VALUE, got '{item}'")
        try:
            parsed[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key] = value
    return parsed


def print_samples(env_id: str, *, pack: str | None, split: str, n: int,
                  options: Sequence[str] = ()) -> int:
    if env_id not in gym.registry and pack is None and env_id in pack_sources():
        # `show pyfunc`: a pack's name stands for its env with that pack.
        env_id, pack = Manifest.read(pack_sources()[env_id].folder).env, env_id
    try:
        kwargs = parse_options(options)
        env = make_task_env(env_id, pack=pack, split=split, **kwargs)
    except (gym.error.Error, PackError, ValueError, TypeError) as exc:
        print(f"error: {exc}")
        return 1
    loaded = env.pack
    size = loaded.size(split)
    total = "unbounded" if size is None else str(size)
    print(f"{env_id}, pack {loaded.name} {loaded.pack_version}, split {split} ({total} tasks)")
    shown_fields = template_fields(loaded.manifest.prompt_template) | {"id"}
    for i in range(n if size is None else min(n, size)):
        task = loaded.task_at(split, i)
        print(f"\n--- {task.id} ---")
        print(env.prompt(task))
        gold = env.gold_completion(task)
        if gold is not None:
            print(f"gold: {gold}")
        else:  # no gold completion: show what the verifier reads instead
            for key, value in task.fields.items():
                if key not in shown_fields:
                    print(f"{key}: {_clip(json.dumps(value, ensure_ascii=False))}")
    env.close()
    return 0


def _clip(text: str) -> str:
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f"... ({len(text)} chars)"
