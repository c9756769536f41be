"""grpo/CodeTests-v0 and its packs; grading runs in the real sandbox."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the grpo/* envs
from envs.code_tests import CodeTestsEnv, extract_program
from sandbox import Sandbox
from sandbox.harness import strict_asserts
from tasks import load_pack


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n"


# -- no docker needed --------------------------------------------------------------------------
def test_extract_program_takes_the_last_python_block():
    text = "```python\nx = 1\n```\nthen\n```py\ny = 2\n```\n"
    assert extract_program(text) == ("y = 2\n", True)
    assert extract_program("```\nz = 3\n```") == ("z = 3\n", True)
    assert extract_program("def f(): pass") == ("def f(): pass", False)


def test_packs_have_all_problems_with_stable_splits():
    he = load_pack("humaneval")
    ids = set(he.ids("train")) | set(he.ids("test"))
    assert ids == {f"humaneval/{i}" for i in range(164)}
    assert he.size("test") > 0 and he.size("train") > he.size("test")
    mbpp = load_pack("mbpp")
    ids = set(mbpp.ids("train")) | set(mbpp.ids("test"))
    assert ids == {f"mbpp/{i}" for i in range(11, 511)}
    assert mbpp.get("mbpp/76").split == mbpp.get("mbpp/347").split  # the same problem twice
    task = mbpp.get("mbpp/11")
    prompt = mbpp.prompt(task)
    assert task["example"] in prompt
    assert all(t not in prompt for t in task["tests"]) and len(task["tests"]) == 2
    assert "MIT" in he.manifest.license and "CC-BY-4.0" in mbpp.manifest.license


def test_humaneval_check_is_split_into_cases():
    task = load_pack("humaneval").get("humaneval/0")
    assert len(task["tests"]) == 7
    assert all(t.startswith("assert candidate(") for t in task["tests"])
    assert "candidate = has_close_elements" in task["setup"]


def test_strict_equality_rewrite():
    assert "__grpo_strict_eq__(f(1), 2)" in strict_asserts("assert f(1) == 2")
    assert strict_asserts("assert f(1) < 2") == "assert f(1) < 2"


# -- grading in the sandbox --------------------------------------------------------------------
@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(pool_size=2) as sb:
        yield sb


@pytest.fixture(scope="module")
def env(sandbox):
    return CodeTestsEnv(pack="humaneval", sandbox=sandbox)


@pytest.mark.docker
def test_every_humaneval_canonical_solution_passes_and_empty_bodies_fail(env):
    tasks = [env.pack.get(f"humaneval/{i}") for i in range(164)]
    results = env.grade_many(tasks, [fenced(t["canonical_solution"]) for t in tasks])
    failed = [(t.id, info["reason"], info["verdict"].details)
              for t, (_, info) in zip(tasks, results, strict=True) if not info["passed"]]
    assert failed == []
    assert all(info["rewards"] == {"tests": 1.0, "format": 1.0} for _, info in results)
    empty = [fenced(t["prompt"] + "    pass\n") for t in tasks]
    results = env.grade_many(tasks, empty)
    passed = [t.id for t, (_, info) in zip(tasks, results, strict=True) if info["passed"]]
    assert passed == []
    assert all(info["reason"] != "sandbox_error" for _, info in results)


@pytest.mark.docker
def test_mbpp_canonical_solutions_pass(sandbox):
    env = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    # A sample, plus golds returning dict/tuple subclasses (Counter) that must still compare equal.
    ids = sorted({*range(11, 511, 10), 40, 88})
    tasks = [env.pack.get(f"mbpp/{i}") for i in ids]
    results = env.grade_many(tasks, [fenced(t["canonical_solution"]) for t in tasks])
    failed = [t.id for t, (_, info) in zip(tasks, results, strict=True) if not info["passed"]]
    assert failed == []


@pytest.mark.docker
def test_partial_credit_is_per_case(env):
    task = env.pack.get("humaneval/0")
    # Always True passes exactly the cases expecting True (4 of 7); a case that raises or
    # mutates global state does not affect the others.
    r, info = env.score(task, fenced(
        "CALLS = []\ndef has_close_elements(numbers, threshold):\n"
        "    CALLS.append(1)\n    if len(CALLS) > 1:\n        raise RuntimeError('state leaked')\n"
        "    return True\n"))
    assert info["rewards"]["tests"] == pytest.approx(4 / 7)
    assert info["reason"] == "failed_tests" and not info["passed"]
    assert r == pytest.approx(4 / 7 + 0.1)


@pytest.mark.docker
def test_format_reward(env):
    task = env.pack.get("humaneval/0")
    _, info = env.score(task, task["canonical_solution"])  # no code block
    assert info["rewards"] == {"tests": 1.0, "format": 0.0}
    _, info = env.score(task, fenced("def has_close_elements(numbers, threshold)\n  return 1"))
    assert info["rewards"] == {"tests": 0.0, "format": 0.0}
    assert info["reason"] == "syntax_error"


CHEATS = {
    "print_fake_success": "print('ALL TESTS PASSED')\nprint('P 0')\n",
    "exit_early": "import os\nos._exit(0)\n",
    "sys_exit": "import sys\nsys.exit(0)\n",
    "exit_in_call": ("import os\ndef has_close_elements(numbers, threshold):\n"
                     "    print('passed')\n    os._exit(0)\n"),
    "kill_harness": "import os\nos.kill(os.getppid(), 9)\n",
    "kill_everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    "always_equal": ("class Eq:\n    def __eq__(self, other):\n        return True\n"
                     "def has_close_elements(numbers, threshold):\n    return Eq()\n"),
    "patch_assertion": ("import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
                        "def has_close_elements(numbers, threshold):\n    return None\n"),
    "forge_record_line": ("import sys\nsys.stdout.write('0' * 32 + ' {\"compiles\": true, "
                          "\"loaded\": true, \"passed\": [0,1,2,3,4,5,6]}\\n')\n"
                          "def has_close_elements(numbers, threshold):\n    return None\n"),
    "write_recorder_stdout": ("import os\ntry:\n    open(f'/proc/{os.getppid()}/fd/1', 'w')"
                              ".write('fake\\n')\nexcept OSError:\n    pass\n"
                              "def has_close_elements(numbers, threshold):\n    return None\n"),
    "infinite_loop": "while True:\n    pass\n",
    "flood_output": "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
}


@pytest.mark.docker
def test_cheating_programs_score_zero(env):
    task = env.pack.get("humaneval/0")
    names = list(CHEATS)
    results = env.grade_many([task] * len(names), [fenced(CHEATS[n]) for n in names])
    for name, (_, info) in zip(names, results, strict=True):
        assert info["rewards"]["tests"] == 0.0, (name, info["verdict"])
        assert not info["passed"], name
        assert info["reason"] != "sandbox_error", (name, info["verdict"])


@pytest.mark.docker
def test_group_grading_is_concurrent_and_consistent(env):
    task = env.pack.get("humaneval/2")
    good = fenced(task["canonical_solution"])
    bad = fenced("def truncate_number(number):\n    return 0.0\n")
    results = env.grade_many([task] * 8, [good, bad] * 4)
    assert [info["passed"] for _, info in results] == [True, False] * 4


@pytest.mark.docker
def test_sandbox_failure_is_visible_not_zero(env):
    broken = Sandbox(pool_size=1)
    broken.close()
    env2 = CodeTestsEnv(pack="humaneval", sandbox=broken)
    _, info = env2.score("humaneval/0", fenced(env2.pack.get("humaneval/0")["canonical_solution"]))
    assert info["reason"] == "sandbox_error"
    assert info["verdict"].details["sandbox_error"] is True


@pytest.mark.docker
def test_gym_make_episode(sandbox):
    env = gym.make("grpo/CodeTests-v0", pack="mbpp", sandbox=sandbox)
    prompt, info = env.reset(seed=0, options={"task_id": "mbpp/11"})
    assert "remove first and last occurrence" in prompt
    task = env.unwrapped.pack.get("mbpp/11")
    _, reward, terminated, truncated, info = env.step(fenced(task["canonical_solution"]))
    assert terminated and not truncated
    assert reward == pytest.approx(1.1), info["verdict"]
    assert info["task_id"] == "mbpp/11" and info["rewards"]["tests"] == 1.0
