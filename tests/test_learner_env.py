"""Every registered grpo/* env and the example domain meet the env -> learner contract
(``envs.contract``): each hook of ``LearnerEnv`` is there and takes the learner's call shape,
each attribute has its type, and the info of real ``score`` calls (and of a tool episode's last
step) holds ``ScoreInfo``'s keys with their types."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.contract import LearnerEnv, ScoreInfo
from envs.perturb import Perturbation
from tasks import Pack, load_folder

ROOT = Path(__file__).resolve().parents[1]
NEW_DOMAIN = ROOT / "examples" / "new-domain"
GRPO_IDS = sorted(k for k in gym.registry if k.startswith("grpo/"))
DOCKER_IDS = {"grpo/CodeTests-v0"}  # grading runs programs in the sandbox
HOOKS = sorted(n for n, v in vars(LearnerEnv).items()
               if inspect.isfunction(v) and not n.startswith("_"))
# The names the protocol's hints use under TYPE_CHECKING, to resolve them here.
# The protocol's attributes are read-only properties: their return hints.
ATTRIBUTES = {n: typing.get_type_hints(v.fget, localns={"Pack": Pack,
                                                        "Perturbation": Perturbation})["return"]
              for n, v in vars(LearnerEnv).items() if isinstance(v, property)}


def _runtime_type(hint: Any) -> Any:
    """What ``isinstance`` can check of a hint: its origin (``dict[str, float]`` -> dict)."""
    origin = typing.get_origin(hint)
    if origin is typing.NotRequired or origin is typing.Required:
        return _runtime_type(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        return tuple(_runtime_type(a) for a in typing.get_args(hint))
    if hint is Any:
        return object
    if hint is type(None):
        return type(None)
    return origin or hint


def _flat(kind: Any) -> tuple[type, ...]:
    return tuple(t for k in (kind if isinstance(kind, tuple) else (kind,))
                 for t in (_flat(k) if isinstance(k, tuple) else (k,)))


def call_shape_problems(env: Any) -> list[str]:
    """The protocol's hooks ``env`` lacks or cannot be called with as the protocol declares
    them (every parameter passed as the protocol allows: positionally, or by keyword)."""
    out = []
    for name in HOOKS:
        method = getattr(env, name, None)
        if not callable(method):
            out.append(f"{name}: missing")
            continue
        declared = inspect.signature(getattr(LearnerEnv, name))
        args, kwargs = [], {}
        for p in list(declared.parameters.values())[1:]:  # without self
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = None
            else:
                args.append(None)
        try:
            inspect.signature(method).bind(*args, **kwargs)
        except TypeError as exc:
            out.append(f"{name}{declared}: {exc}")
    return out


def attribute_problems(env: Any) -> list[str]:
    out = []
    for name, hint in ATTRIBUTES.items():
        if not hasattr(env, name):
            out.append(f"{name}: missing")
        elif not isinstance(getattr(env, name), _flat(_runtime_type(hint))):
            out.append(f"{name}: {type(getattr(env, name)).__name__}, not {hint}")
    return out


def info_problems(info: Mapping[str, Any]) -> list[str]:
    """Keys of ``ScoreInfo`` that ``info`` lacks (required ones) or holds with another type."""
    hints = typing.get_type_hints(ScoreInfo)
    out = [f"{k}: missing" for k in sorted(ScoreInfo.__required_keys__) if k not in info]
    for key, hint in hints.items():
        if key in info and not isinstance(info[key], _flat(_runtime_type(hint))):
            out.append(f"{key}: {type(info[key]).__name__}, not {hint}")
    if isinstance(info.get("rewards"), dict):
        out += [f"rewards[{k!r}]: {v!r}" for k, v in info["rewards"].items()
                if not isinstance(k, str) or not isinstance(v, int | float)]
    return out


def _example_env() -> Any:
    import sys

    sys.path.insert(0, str(NEW_DOMAIN))
    try:
        from grpo_unit_convert.env import UnitConvertEnv
    finally:
        sys.path.remove(str(NEW_DOMAIN))
    return UnitConvertEnv(pack=load_folder(NEW_DOMAIN / "grpo_unit_convert" / "pack"))


def _params() -> list[Any]:
    out = [pytest.param(i, id=i, marks=[pytest.mark.docker] if i in DOCKER_IDS else [])
           for i in GRPO_IDS]
    return [*out, pytest.param("example", id="examples/new-domain")]


@contextmanager
def _made(env_id: str) -> Iterator[Any]:
    """The env as a learner gets it; grpo/OpenEnv-v0 as the client of a real server (our own
    MathExact served in a thread), since it has no env without one."""
    if env_id == "example":
        yield _example_env()
    elif env_id == "grpo/OpenEnv-v0":
        pytest.importorskip("openenv")
        from tests.openenv_serve_helpers import served

        with served("grpo/MathExact-v0", {"pack": "arith"}) as url:
            yield gym.make(env_id, base_url=url).unwrapped
    else:
        try:
            made = gym.make(env_id).unwrapped
        except ImportError as exc:  # an optional extra's env without the extra installed
            pytest.skip(f"{env_id} needs {exc.name}")
        yield made


@pytest.fixture(params=_params())
def env(request):
    with _made(request.param) as made:
        yield made
        made.close()


def test_the_protocol_names_every_hook_the_learner_calls():
    assert {"score", "episode", "prompt", "tool_call_end", "answer_end", "flag", "perturbations",
            "infra_outage", "no_signal_hint"} <= set(HOOKS)
    assert {"pack", "max_turns", "reward_weights", "env_id"} <= set(ATTRIBUTES)


def test_env_meets_the_learner_contract(env):
    assert call_shape_problems(env) == []
    assert attribute_problems(env) == []
    assert isinstance(env.prompt(env.pack.task_at(env.split, 0)), str)


def test_score_info_holds_the_keys_the_learner_reads(env):
    if (outage := env.infra_outage()) is not None:  # a server or engine this machine lacks
        pytest.skip(outage)
    task = env.pack.task_at(env.split, 0)
    completions = ["I do not know.", "\ud800 not encodable"]
    gold = env.gold_completion(task)
    if gold is not None:
        completions.append(gold)
    results = [env.score(task, c) for c in completions]
    for reward, info in results:
        assert isinstance(reward, float)
        assert info_problems(info) == [], info
    if gold is not None:
        assert results[-1][1]["passed"] is True
    assert results[0][1]["passed"] is False
    if env.max_turns > 1:  # a multi-turn env: the episode's last step counts the turns
        _, _, terminated, _, info = env.episode(task).step(gold or "I do not know.")
        assert terminated and info_problems(info) == [] and info["turns"] == 1
        if getattr(env, "tool", None) is not None:  # and a Python tool's calls
            assert {"tool_calls", "tool_errors", "tool_s"} <= set(info)


def test_the_checks_find_what_breaks_the_contract():
    """The checkers themselves: a missing hook, a hook with another call shape, a wrongly
    typed attribute and info without its keys are all reported."""

    class Broken:
        env_id = "x"
        pack = None
        max_turns = "1"
        reward_weights = default_weights = {"a": 1.0}
        check_components, perturbation_kinds = ("a",), ()

        def prompt(self, task): ...
        def score(self, task): ...  # no completion
        def episode(self, task): ...
        def tool_call_end(self, text): ...
        def answer_end(self, text): ...
        def flag(self, task, completion, verdict=None): ...  # no keywords
        def perturbations(self, task): ...
        def infra_outage(self): ...
        def curriculum_key(self, task): ...
        def curriculum_keys(self): ...

    shapes = call_shape_problems(Broken())
    assert [s.split("(")[0].split(":")[0] for s in shapes] == ["flag", "no_signal_hint", "score"]
    assert sorted(p.split(":")[0] for p in attribute_problems(Broken())) == ["max_turns", "pack"]
    found = info_problems({"task_id": 1, "rewards": {"a": "1"}, "passed": True})
    assert "task_id: int, not <class 'str'>" in found and "verdict: missing" in found
    assert "rewards['a']: '1'" in found
