"""Tests that a shallow program can pass, in families (``envs.domains.code_tests.task_baselines``):
constants (None, True, False, 0, 1, "", [], {}), the shown answers, the literal strings the
prompt shows, and simple transforms of each argument (itself, its type's empty value, first and
last item, min, max, length, sum, sorted, reversed, parity, truthiness), found by
``CodeTestsEnv.trivially_passed``.

``python -m envs validate`` refuses a code pack with such a task, naming the task and the
answer; the built-in packs have none (their fixes: ``tasks/humaneval`` and ``tasks/mbpp``)."""

from __future__ import annotations

import json

import pytest

from envs.domains.code_tests import BASELINES, CodeTestsEnv, shown_literals, task_baselines
from envs.tools.validate import validate_folder
from tasks import Task, load_pack
from tasks.mbpp import EXAMPLE_INDEX

pytestmark = pytest.mark.docker


def _task(tests: list[str], shown: list[str] = (), **fields) -> Task:
    return Task("synthetic/1", "train", {"tests": tests, "shown_tests": list(shown), **fields})


def test_each_baseline_family_is_found_on_the_cases_it_passes(sandbox):
    env = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    tasks = {
        "constant": _task(["assert f(3) == True", "assert f(4) == True"]),
        "shown_case_does_not_count": _task(["assert f(3) == False", "assert f(4) == True",
                                            "assert f(5) == True"], shown=["assert f(3) == False"]),
        "shown_answer": _task(["assert f(3) == 7", "assert f(4) == 7"], shown=["assert f(3) == 7"]),
        "echo": _task(["assert f(3, 1) == 3", "assert f(-2, 9) == -2"]),
        "empty_of_type": _task(["assert f('ab') == ''", "assert f('c') == ''"]),
        "shown_string": _task(["assert f('ab') == 'Not matched!'",
                               "assert f('c') == 'Not matched!'"],
                              text="Return 'Found a match!' or 'Not matched!'."),
        "second_sorted": _task(["assert f(1, [3, 1, 2]) == [1, 2, 3]",
                                "assert f(0, [9, 8]) == [8, 9]"]),
        "parity": _task(["assert f(3) == True", "assert f(5) == True", "assert f(4) == False"]),
        "last_item": _task(["assert f([1, 5, 2]) == 2", "assert f([7, 0]) == 0"]),
        "fallback": _task(["assert f([3, 1, 5]) == 3", "assert f([]) == False",
                           "assert f([7]) == 7"]),
        "an_unshown_constant": _task(["assert f(3) == 'x'", "assert f(4) == 'x'"]),
        "honest": _task(["assert f(3) == 9", "assert f(4) == 16"]),
    }
    found = env.trivially_passed([Task(name, "train", t.fields) for name, t in tasks.items()])
    # 1 == True, as the tests compare
    truthy = ["True", "1", "the hidden answer True", "the first argument is truthy"]
    assert found == {
        "constant": truthy,
        "shown_case_does_not_count": truthy,
        "shown_answer": ["the shown answer 7", "the hidden answer 7"],
        "echo": ["the first argument"],
        "empty_of_type": ['""', "the hidden answer ''", "the first argument's empty value"],
        "shown_string": ["the shown string 'Not matched!'", "the hidden answer 'Not matched!'"],
        "second_sorted": ["the second argument sorted"],
        "parity": ["the first argument is odd"],
        "last_item": ["the first argument's last item"],
        # A transform that falls back to a constant where it raises (on the empty list).
        "fallback": ["the first argument's first item, else False",
                     "the first argument's first item, else 0",
                     "the first argument's first item, else the hidden answer False"],
        # Not shown, but a policy may guess it (MBPP's 'Not matched!' beside 'Found a match!').
        "an_unshown_constant": ["the hidden answer 'x'"],
    }
    assert len(BASELINES) == 8


def test_the_families_cover_every_argument_and_the_prompts_strings():
    task = _task(["assert f([2, 1], 'ab', 3) == 0"], text='Say "Yes" or \'No\'; don\'t shout.',
                 example="assert f([2, 1], 'ab', 3) == 0")
    programs = task_baselines(task)
    assert programs["the third argument's length"] == "len(args[2])"
    assert programs["the second argument reversed"] == "args[1][::-1]"
    assert "the fourth argument" not in programs
    # The example's string constants and the prose's quoted words, not its apostrophes.
    assert shown_literals(task) == ["Yes", "No", "ab"]
    assert programs["the shown string 'No'"] == "'No'"


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
        "or the hidden answer True or the first argument is even or the first argument is "
        "truthy passes every graded test; add tests whose answers differ"]
    assert report.golds_passed == 2  # both golds are right: the tests are what is weak


def test_validate_refuses_a_missed_edge_and_a_half_paying_constant(tmp_path, sandbox,
                                                                   monkeypatch):
    """pyfunc 1.2.0's parity tasks mostly had no n = 0 case: ``n % 2 == 0 and n != 0`` was
    paid in full (and learned) in the design card's run. A record that declares that mutant
    and tests no zero is refused by name; so is a strict record whose hidden answers are 5
    True of 6 (``return True`` earns 0.83). The fixed record passes."""
    import envs.sandboxes

    monkeypatch.setattr(envs.sandboxes, "_shared", sandbox)
    gold = "def parity(n):\n    if n % 2 == 0:\n        return 'even'\n    return 'odd'\n"
    no_zero = "def parity(n):\n    if n % 2 == 0 and n != 0:\n        return 'even'\n    return 'odd'\n"
    mutant = {"edit": "n % 2 == 0 -> n % 2 == 0 and bool(n)", "program": no_zero}
    fields = {"text": "even or odd", "entry_point": "parity", "canonical_solution": gold,
              "strict_baselines": True, "mutants": [mutant]}
    cases = lambda xs: [f"assert parity({x}) == {'even' if x % 2 == 0 else 'odd'!r}"  # noqa: E731
                        for x in xs]
    gold7 = "def f(n):\n    return n % 7 == 0\n"
    folder = _code_pack(tmp_path / "pack", [
        {"id": "no-zero", **fields, "tests": cases([3, 8, 5, 12, -7, 40, 9, -2])},
        {"id": "with-zero", **fields, "tests": cases([3, 8, 0, 5, 12, -7, 9, 2])},
        {"id": "mostly-true", "text": "divisible by 7", "entry_point": "f",
         "canonical_solution": gold7, "strict_baselines": True,
         "tests": [f"assert f({x}) == {x % 7 == 0}" for x in (14, 3, 0, 7, 21, -7, 35, 5)],
         "shown_tests": ["assert f(14) == True", "assert f(3) == False"]},
    ])
    report = validate_folder(folder)
    where = f"{folder / 'train.jsonl'}"
    assert sorted(str(p) for p in report.errors) == [
        f"{where}:1: a wrong program earns full marks: the reference with n % 2 == 0 -> "
        "n % 2 == 0 and bool(n) passes every graded test; add a test on that edge",
        f"{where}:3: a trivial program earns more than half the graded tests: returning True "
        "(0.83 of the cases) or 1 (0.83 of the cases) or the shown answer True (0.83 of "
        "the cases); add tests whose answers differ (balanced outcomes)"]
    assert report.golds_passed == 3


def test_no_built_in_code_task_is_payable_by_a_trivial_program(sandbox):
    """Every test task of both packs, and the MBPP tasks whose shown example was moved so that
    their hidden answers differ (mbpp/79: ``word_len("great") == True`` is shown now; mbpp/29's
    hidden answers are no longer each list's max)."""
    he = CodeTestsEnv(pack="humaneval", sandbox=sandbox)
    mbpp = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    assert mbpp.pack.get("mbpp/79")["example"] == 'assert word_len("great") == True'
    # (those still in the pack: some left it since, their memorised public cases half-paying a
    # shallow program: ``left_out`` in tasks/mbpp/amplified.json)
    in_pack = set(mbpp.pack.ids("train") + mbpp.pack.ids("test"))
    moved = [mbpp.pack.get(f"mbpp/{i}") for i in EXAMPLE_INDEX if f"mbpp/{i}" in in_pack]
    assert len(moved) >= len(EXAMPLE_INDEX) - 8
    test_tasks = [mbpp.pack.get(i) for i in mbpp.pack.ids("test")]
    assert he.trivially_passed([he.pack.get(i) for i in he.pack.ids("test")]) == {}
    assert mbpp.trivially_passed(test_tasks + [t for t in moved if t.split == "train"]) == {}
    # Tasks left out as shallow-payable are back where their amplified cases (tasks.amplify)
    # fail every shallow program; the train-split ones are checked here too.
    he_ids = he.pack.ids("train") + he.pack.ids("test")
    back = ["humaneval/40", "humaneval/54", "humaneval/34", "humaneval/58"]
    assert set(back) <= set(he_ids)
    assert he.trivially_passed([he.pack.get(i) for i in back]) == {}
    mbpp_ids = mbpp.pack.ids("train") + mbpp.pack.ids("test")
    # min(l) is the builtin asked (mbpp/62): the answer by another route, so it is back and no
    # longer a shallow program there; the identity for minimum(a, b) (mbpp/404) is not.
    assert {"mbpp/62", "mbpp/203"} <= set(mbpp_ids) and "mbpp/404" not in mbpp_ids
    back = [mbpp.pack.get(i) for i in ("mbpp/203", "mbpp/16", "mbpp/62", "mbpp/141")]
    assert mbpp.trivially_passed(back) == {}


def test_the_moved_example_keeps_the_split():
    # The split hashes the first assert, whichever is shown: moving the example moves no task.
    mbpp = load_pack("mbpp")
    assert mbpp.get("mbpp/79").split == "test" and mbpp.get("mbpp/19").split == "train"


def test_shallow_completions_are_the_baselines_as_a_model_writes_them(sandbox):
    """The report card's hook: each baseline as a fenced program defining the entry point,
    graded by ``score`` exactly as ``baseline_scores`` grades it."""
    env = CodeTestsEnv(pack="mbpp", sandbox=sandbox)
    full = env.pack.get("mbpp/12")
    task = Task(full.id, full.split, {**full.fields, "tests": full["tests"][:3]})  # its own 3
    completions = env.shallow_completions(task)
    baselines = task_baselines(task)
    assert {f"returns {name}" for name in baselines} <= set(completions)
    assert {"empty", "echo_prompt"} <= set(completions)  # the defaults are kept
    program = completions["returns the first argument sorted"]
    assert program.startswith("```python\ndef sort_matrix(*args, **kwargs):\n")
    scores = env.baseline_scores(task)
    names = ["the first argument sorted", "the shown answer [[1, 1, 1], [1, 2, 3], [2, 4, 5]]",
             "the first argument"]
    graded = env.grade_many([task] * len(names), [completions[f"returns {n}"] for n in names])
    assert [info["rewards"]["tests"] for _, info in graded] == [scores[n] for n in names]
    assert scores["the first argument sorted"] == 0.5  # [[-2, 4, -5], ...] sorts either way
    assert not any(info["passed"] for _, info in graded)
