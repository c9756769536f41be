"""The same completions graded over the wire and in process: what the served-env tests and
``benchmarks/openenv_serve.py`` compare.

``mixed_cases`` draws completions of mixed quality for a built-in env from the report card's
material: the golds (full marks), the card's corpora of known hacks and honest answers
(``envs/tools/card/corpora``), and the shallow completions (empty, the prompt echoed, constants).
A tool env also gets episodes that call the tool before answering. ``play`` runs one case
through an OpenEnv client; ``reference`` is ``env.score`` of the case's final turn. The cases are played by task id, on
a server made with ``replay_kwargs`` (``split="all"``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envs.base import ALL_SPLITS, TaskEnv
from envs.tools.card.corpus import CORPORA, load
from tasks import PackError

#: The keywords each built-in env is served with in the side-by-side checks: the configuration
#: most of its corpus lines are written for.
SERVED: dict[str, dict[str, Any]] = {
    "grpo/MathExact-v0": {"pack": "arith", "level": 1, "require_boxed": True},
    "grpo/CodeTests-v0": {"pack": "humaneval"},
    "grpo/JsonSchema-v0": {"pack": "extract"},
    "grpo/MathPython-v0": {"pack": "arith", "level": 1},
}


def replay_kwargs(env_id: str) -> dict[str, Any]:
    """``SERVED[env_id]`` with ``split="all"``: the keywords of a server that replays
    ``mixed_cases`` (test tasks, and corpus lines of any split) by id, which a server of the
    train split refuses."""
    return {**SERVED[env_id], "split": ALL_SPLITS}


#: A tool call a tool episode makes before its answer.
TOOL_CALL = "Let me check.\n```python\nprint(6 * 7)\n```"


@dataclass(frozen=True)
class Case:
    """One episode to play: the task and the turns the policy sends, in order."""

    kind: str  # "gold", "hacks", "honest", "shallow:<name>", "tool+gold"
    task_id: str
    turns: tuple[str, ...]


def mixed_cases(env: TaskEnv, env_id: str, env_kwargs: Mapping[str, Any], n: int,
                seed: int = 0) -> list[Case]:
    """Up to ``n`` cases for ``env`` (made with ``env_kwargs``), the kinds interleaved so any
    prefix is mixed."""
    tasks = [env.pack.task_at("test", i) for i in range(min(n, env.pack.size("test") or n))]
    by_kind: dict[str, list[Case]] = {"gold": [], "corpus": [], "shallow": [], "tool": []}
    for task in tasks:
        gold = env.gold_completion(task)
        if gold is not None:
            by_kind["gold"].append(Case("gold", task.id, (gold,)))
            if env.tool is not None:
                by_kind["tool"].append(Case("tool+gold", task.id, (TOOL_CALL, gold)))
        for name, text in sorted(env.shallow_completions(task).items()):
            by_kind["shallow"].append(Case(f"shallow:{name}", task.id, (text,)))
    for line in load([CORPORA]):
        if (line.env == env_id and line.task_id and line.env_kwargs == dict(env_kwargs)
                and _exists(env, line.task_id)):  # a line may outlive its task (pack drops)
            by_kind["corpus"].append(Case(line.kind, line.task_id, (line.completion,)))
    rng = random.Random(seed)
    for cases in by_kind.values():
        rng.shuffle(cases)
    if env.tool is not None:  # one turn each: a tool call would run and the episode go on
        for kind in ("gold", "corpus", "shallow"):
            by_kind[kind] = [c for c in by_kind[kind] if env.tool_call_end(c.turns[0]) is None]
    mixed: list[Case] = []
    queues = [cases for cases in by_kind.values() if cases]
    while len(mixed) < n and queues:
        for cases in list(queues):
            if len(mixed) < n and cases:
                mixed.append(cases.pop())
            if not cases:
                queues.remove(cases)
    return mixed


def _exists(env: TaskEnv, task_id: str) -> bool:
    try:
        env.pack.get(task_id)
    except PackError:
        return False
    return True


def reference(env: TaskEnv, case: Case) -> float:
    """``env.score`` of the case's final turn: what the episode's reward must be."""
    return env.score(case.task_id, case.turns[-1])[0]


def play(client: Any, case: Case) -> tuple[float | None, list[dict[str, Any]]]:
    """Play ``case`` through an OpenEnv client (``GenericEnvClient``, used synchronously):
    the final reward and every observation, the reset's first. A case whose episode ends
    before its last turn, or does not end at it, comes back with reward None."""
    result = client.reset(task_id=case.task_id)
    seen = [dict(result.observation)]
    for i, turn in enumerate(case.turns):
        result = client.step({"completion": turn})
        seen.append(dict(result.observation))
        if result.done != (i == len(case.turns) - 1):
            return None, seen
    return result.reward, seen
