"""Tests that a trivial program can pass: constants (None, True, False, 0, 1, "", [], {}), the
first argument echoed and its type's empty value (``CodeTestsEnv.trivially_passed``).

``python -m envs validate`` refuses a code pack with such a task, naming the task and the
answer; the built-in packs have none (their fixes: ``tasks/humaneval`` and ``tasks/mbpp``)."""

from __future__ import annotations

import json

import pytest

from envs.code_tests import BASELINES, CodeTestsEnv
from envs.validate import validate_folder
from tasks import Task, load_pack
from tasks.mbpp import EXAMPLE_INDEX

pytestmark = pytest.mark.docker


def _task(tests: list[str], shown: list[str] = ()) -> Task:
    return Task("synthetic/1", "train", {"tests": tests, "shown_tests": list(shown)})


def test_each_baseline_is_found_on_the_cases_it_passes(sandbox):
    env = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    tasks = {
        "constant": _task(["assert f(3) == True", "assert f(4) == True"]),
        "shown_case_does_not_count": _task(["assert f(3) == False", "assert f(4) == True",
                                            "assert f(5) == True"], shown=["assert f(3) == False"]),
        "echo": _task(["assert f(3, 1) == 3", "assert f(-2, 9) == -2"]),
        "empty_of_type": _task(["assert f('ab') == ''", "assert f('c') == ''"]),
        "honest": _task(["assert f(3) == 9", "assert f(4) == 16"]),
    }
    found = env.trivially_passed([Task(name, "train", t.fields) for name, t in tasks.items()])
    assert found == {
        "constant": ["True", "1"],  # 1 == True in Python, as the tests compare
        "shown_case_does_not_count": ["True", "1"],
        "echo": ["the first argument"],
        "empty_of_type": ['""', "the first argument's empty value"],
    }
    assert len(BASELINES) == 10


def _code_pack(folder, records):
    folder.mkdir()
    (folder / "pack.toml").write_text(
        'name = "tiny-code"\nversion = "0.1.0"\ndescription = "two functions"\n'
        'license = "CC0-1.0"\nsource = "written for this test"\nenv = "grpo/CodeTests-v0"\n'
        'prompt_template = "{text}"\n[splits]\ntrain = "train.jsonl"\n')
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_validate_refuses_a_task_that_a_constant_passes(tmp_path, sandbox, monkeypatch):
    import envs.sandboxes

    monkeypatch.setattr(envs.sandboxes, "_shared", sandbox)
    folder = _code_pack(tmp_path / "pack", [
        {"id": "even", "text": "Is n even?", "entry_point": "is_even",
         "tests": ["assert is_even(2) == True", "assert is_even(4) == True"],
         "canonical_solution": "def is_even(n):\n    return n % 2 == 0\n"},
        {"id": "square", "text": "Square n.", "entry_point": "square",
         "tests": ["assert square(2) == 4", "assert square(3) == 9"],
         "canonical_solution": "def square(n):\n    return n * n\n"},
    ])
    report = validate_folder(folder)
    assert not report.ok
    assert [str(p) for p in report.errors] == [
        f"{folder / 'train.jsonl'}:1: a trivial program earns full marks: returning True or 1 "
        "passes every graded test; add tests whose answers differ"]
    assert report.golds_passed == 2  # both golds are right: the tests are what is weak


def test_no_built_in_code_task_is_payable_by_a_trivial_program(sandbox):
    """Every test task of both packs, and the MBPP tasks whose shown example was moved so that
    their hidden answers differ (mbpp/79: ``word_len("great") == True`` is shown now)."""
    he = CodeTestsEnv(pack="humaneval", sandbox=sandbox)
    mbpp = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    assert mbpp.pack.get("mbpp/79")["example"] == 'assert word_len("great") == True'
    moved = [mbpp.pack.get(f"mbpp/{i}") for i in EXAMPLE_INDEX]
    test_tasks = [mbpp.pack.get(i) for i in mbpp.pack.ids("test")]
    assert he.trivially_passed([he.pack.get(i) for i in he.pack.ids("test")]) == {}
    assert mbpp.trivially_passed(test_tasks + [t for t in moved if t.split == "train"]) == {}
    assert {"humaneval/40", "humaneval/54"}.isdisjoint(he.pack.ids("train") + he.pack.ids("test"))


def test_the_moved_example_keeps_the_split():
    # The split hashes the first assert, whichever is shown: moving the example moves no task.
    mbpp = load_pack("mbpp")
    assert mbpp.get("mbpp/79").split == "test" and mbpp.get("mbpp/19").split == "train"
