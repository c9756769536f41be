"""``envs.grading``: the one batch grader, its never-raise policy and its infrastructure-failure
results, through each backend and each caller (the learner, TRL, the card, ``validate``)."""

from __future__ import annotations

import ast
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers grpo/*)
from envs.grading import (
    INFRA_ERROR_KEY,
    EnvBatch,
    Threads,
    grade_batch,
    grading_raised,
    infra_failure_info,
    is_infra_error,
)
from envs.tools.card.grading import grade as card_grade
from envs.tools.integrations import trl as grpo_trl
from learner.sampling.scoring import infra_reason, score_all

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "learner", "sandbox", "tasks")
DOOR = ROOT / "envs" / "grading.py"
#: Grading entry points: a call of one of these inside a loop, or under a broad ``except``,
#: is a batch grader or a never-raise policy of its own.
GRADING_CALLS = {"score", "grade_many", "score_many"}
LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
         ast.GeneratorExp)
#: The callers the issue names, each of which must grade through ``grade_batch``.
CALLERS = {
    "learner/sampling/scoring.py": "score_all",
    "envs/tools/integrations/trl.py": "reward_func",
    "envs/domains/code_tests.py": "grade_many",
    "envs/tools/card/grading.py": "grade",
    "envs/tools/validate.py": "_grade",
    "envs/ray_scoring.py": "score",  # GradingActor.score, on each node
}


def _grading_calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in GRADING_CALLS]


def _broad(handler: ast.ExceptHandler) -> bool:
    return handler.type is None or (isinstance(handler.type, ast.Name)
                                    and handler.type.id in ("Exception", "BaseException"))


def other_batch_graders(root: Path) -> list[str]:
    """Places outside ``envs/grading.py`` that grade a batch or catch a grade's exception:
    ``env.score`` handed to a pool (``map(env.score, ...)``), a grading call inside a loop or a
    comprehension, or one under ``except Exception``."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "envs" / "grading.py":
                continue
            where = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, LOOPS):
                    found += [f"{where}:{c.lineno} {c.func.attr} in a loop"  # type: ignore[attr-defined]
                              for c in _grading_calls(node)]
                elif isinstance(node, ast.Try) and any(_broad(h) for h in node.handlers):
                    found += [f"{where}:{c.lineno} {c.func.attr} under except Exception"  # type: ignore[attr-defined]
                              for stmt in node.body for c in _grading_calls(stmt)]
                elif isinstance(node, ast.Call):
                    found += [f"{where}:{node.lineno} .score passed to {ast.unparse(node.func)}"
                              for a in [*node.args, *(k.value for k in node.keywords)]
                              if isinstance(a, ast.Attribute) and a.attr == "score"]
    return sorted(set(found))


def test_there_is_one_batch_grader():
    assert other_batch_graders(ROOT) == []
    for rel, name in CALLERS.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        [fn] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
        called = {n.func.id for n in ast.walk(fn)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "grade_batch" in called, f"{rel} {name} does not grade through envs.grading"


def test_the_grep_finds_each_kind_of_second_grader(tmp_path):
    """The check above can fail: each way the tree graded a batch before is caught."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "mine.py").write_text(
        "def a(pool, env, ts, cs):\n    return list(pool.map(env.score, ts, cs))\n"
        "def b(env, ts, cs):\n    return [env.score(t, c) for t, c in zip(ts, cs)]\n"
        "def c(env, t, c):\n    try:\n        return env.score(t, c)\n"
        "    except Exception as exc:\n        return exc\n", encoding="utf-8")
    found = other_batch_graders(tmp_path)
    assert [f.split(" ", 1)[0] for f in found] == ["envs/mine.py:2", "envs/mine.py:4",
                                                   "envs/mine.py:7"]


def _env_raising_on(word: str):
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    real = env.score

    def score(task, completion):
        if word in completion:
            raise RuntimeError(f"the checker broke on {word}")
        return real(task, completion)

    env.score = score
    return env, real


def _check_one_raised(env, real, task, completions, results):
    assert len(results) == len(completions)
    for completion, (reward, info) in zip(completions, results, strict=True):
        if "boom" in completion:
            assert reward == 0.0 and is_infra_error(info) and info[INFRA_ERROR_KEY] is True
            assert grading_raised(info) == "RuntimeError: the checker broke on boom"
            assert info["task_id"] == task.id and not info["passed"]
            assert info["rewards"] == {k: 0.0 for k in env.reward_weights}
        else:
            assert (reward, info) == real(task, completion)
            assert not is_infra_error(info) and grading_raised(info) is None


@pytest.mark.parametrize("backend", ["default", "threads", "env_batch"])
def test_a_pair_whose_grading_raises_is_that_pairs_infra_error(backend):
    env, real = _env_raising_on("boom")
    task = env.pack.task_at("test", 0)
    completions = [rf"\boxed{{{task['answer']}}}", "boom", "The answer is 3", "boom again"]
    chosen = {"default": None, "threads": Threads(env, workers=2),
              "env_batch": EnvBatch(env)}[backend]
    if backend == "env_batch":  # a batch path that fails as a whole: graded one by one
        env.grade_many = lambda tasks, completions: 1 / 0
    results = grade_batch(env, [task] * 4, completions, backend=chosen)
    _check_one_raised(env, real, task, completions, results)
    assert results[0][0] > 0  # the gold still earns its reward


def test_a_backend_that_fails_as_a_whole_makes_every_pair_an_infra_error():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    tasks = [env.pack.task_at("test", i) for i in range(2)]

    class Down:
        def score_many(self, tasks, completions):
            raise ConnectionError("the cluster went away")

    class Short:
        def score_many(self, tasks, completions):
            return []

    for backend, said in [(Down(), "ConnectionError: the cluster went away"),
                          (Short(), "returned 0 results for 2 pairs")]:
        results = grade_batch(env, tasks, ["1", "2"], backend=backend)
        assert [r for r, _ in results] == [0.0, 0.0]
        assert [i["task_id"] for _, i in results] == [t.id for t in tasks]
        assert all(is_infra_error(i) and said in i["verdict"].details["error"]
                   for _, i in results)


def test_arguments_that_are_not_a_batch_are_one_line_errors():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    task = env.pack.task_at("test", 0)
    with pytest.raises(ValueError, match="1 tasks but 2 completions"):
        grade_batch(env, [task], ["a", "b"])
    with pytest.raises(TypeError, match="a completion must be a str, got NoneType"):
        grade_batch(env, [task], [None])
    assert grade_batch(env, [], []) == []


def test_an_unknown_task_id_is_graded_as_an_infra_error_that_names_it():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    [(reward, info)] = grade_batch(env, ["arith/no-such-task"], ["1"])
    assert reward == 0.0 and is_infra_error(info) and info["task_id"] == "arith/no-such-task"
    assert grading_raised(info)


def test_the_infra_failure_info_has_the_keys_a_graded_info_has():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    task = env.pack.task_at("test", 0)
    _, graded = env.score(task, "1")
    failed = infra_failure_info(env, task, "the engine went away")
    assert set(graded) <= set(failed) and failed[INFRA_ERROR_KEY] is True
    assert failed["reason"] == "sandbox_error" and is_infra_error(failed)
    assert grading_raised(failed) is None  # an outage, not a verifier bug
    assert failed["verdict"].details == {"sandbox_error": True, "error": "the engine went away"}


def test_the_learner_trl_and_the_card_share_the_policy():
    env, real = _env_raising_on("boom")
    task = env.pack.task_at("test", 0)
    gold = rf"\boxed{{{task['answer']}}}"
    scores = score_all(env, [task] * 3, [gold, "boom", "7"], workers=2)
    assert scores.infra_error == [False, True, False]  # dropped by training, not scored 0
    assert scores.rewards[0] == real(task, gold)[0] > 0
    assert "the checker broke on boom" in infra_reason(scores)

    card = card_grade(env, [(task, gold), (task, "boom")])
    assert card[0].usable and card[0].passed
    assert card[1].error == "RuntimeError: the checker broke on boom" and not card[1].usable



def test_trl_leaves_out_a_pair_whose_grading_raised(monkeypatch):
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    task = env.pack.task_at("test", 0)
    gold = rf"\boxed{{{task['answer']}}}"
    real = type(env).score

    def score(self, task, completion):
        if "boom" in completion:
            raise RuntimeError("the checker broke on boom")
        return real(self, task, completion)

    monkeypatch.setattr(type(env), "score", score)
    reward = grpo_trl.reward_func("grpo/MathExact-v0", pack="arith", level=1)
    got = reward(completions=[gold, "boom", "7"], task_id=[task.id] * 3)
    assert got == [pytest.approx(real(env, task, gold)[0]), None, 0.0] and got[0] > 0
