"""The procedural ``pyfunc`` code pack: deterministic levels, disjoint splits, golds that pass
in the real sandbox, and no task that a trivial program earns (``CodeTestsEnv.trivially_passed``
with the record's ``strict_baselines``, as ``python -m envs validate`` runs it)."""

from __future__ import annotations

import ast
import re
from collections import Counter

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.__main__ import main
from envs.domains.code_tests import BASELINES, TRANSFORMS, CodeTestsEnv, task_baselines
from tasks import PackError, Task, load_pack
from tasks.pack import load_folder
from tasks.pyfunc import N_HIDDEN, N_SHOWN, PyFuncGenerator
from tasks.registry import pack_sources

FOLDER = pack_sources()["pyfunc"].folder


def _fresh(level: int | None = None):
    # load_folder, not load_pack: a new generator each time, no cache shared between the two.
    return load_folder(FOLDER, **({} if level is None else {"level": level}))


def _key(task: Task) -> str:
    """The function asked, whatever its name: the reference without its ``def`` line's name."""
    head, body = task["canonical_solution"].split("\n", 1)
    return re.sub(r"^def \w+", "def f", head) + "\n" + body


def _call_args(test: str) -> str:
    call = ast.parse(test).body[0].test.left
    return ast.dump(ast.Tuple(call.args))


def test_generation_is_deterministic():
    for level in (None, 1, 4, 6):
        one, two = _fresh(level), _fresh(level)
        assert one.records("test") == two.records("test")
        assert ([one.task_at("train", i).fields for i in range(60)]
                == [two.task_at("train", i).fields for i in range(60)])
    assert _fresh().pack_version == _fresh().pack_version


def test_levels_ids_and_bad_options():
    mixed = load_pack("pyfunc")
    assert [mixed.task_at("train", i).id for i in range(7)] == [
        "pyfunc/L1-0", "pyfunc/L2-1", "pyfunc/L3-2", "pyfunc/L4-3", "pyfunc/L5-4", "pyfunc/L6-5",
        "pyfunc/L1-6"]
    one = load_pack("pyfunc", level=1)
    assert one.get("pyfunc/L1-17")["level"] == 1
    assert {one.get(i)["level"] for i in one.ids("test")} == {1}
    with pytest.raises(PackError):
        one.get("pyfunc/L3-17")
    by_level = Counter(mixed.get(i)["level"] for i in mixed.ids("test"))
    assert set(by_level) == set(range(1, 7)) and min(by_level.values()) >= 25, by_level
    for bad in (0, 7, True, 2.0):
        with pytest.raises(PackError, match="level must be one of"):
            load_pack("pyfunc", level=bad)


def test_records_show_two_examples_and_hide_six_other_cases():
    pack = load_pack("pyfunc")
    tasks = [pack.get(i) for i in pack.ids("test")] + [pack.task_at("train", i)
                                                        for i in range(300)]
    for task in tasks:
        tests, shown, name = task["tests"], task["shown_tests"], task["entry_point"]
        assert len(tests) == N_SHOWN + N_HIDDEN and shown == tests[:N_SHOWN]
        # Every case is on its own input, so no hidden case repeats a shown one.
        assert len({_call_args(t) for t in tests}) == len(tests), task.id
        prompt = pack.prompt(task)
        assert f"`{name}(" in prompt and "```python code block" in prompt
        assert all(t in prompt for t in shown) and not any(t in prompt for t in tests[N_SHOWN:])
        assert task["canonical_solution"].startswith(f"def {name}(")
        assert task["strict_baselines"] is True
        # The reference answers its own cases (the sandboxed check is below).
        namespace: dict = {}
        exec(task["canonical_solution"], namespace)  # noqa: S102 - the pack's own reference
        for test in tests:
            exec(test, namespace)  # noqa: S102


def test_train_and_test_never_share_a_function():
    pack = load_pack("pyfunc")
    test = [pack.get(i) for i in pack.ids("test")]
    test_keys = {_key(t) for t in test}
    test_prompts = {pack.prompt(t) for t in test}
    train = [pack.task_at("train", i) for i in range(3000)]
    assert not test_keys & {_key(t) for t in train}
    assert not test_prompts & {pack.prompt(t) for t in train}
    gen = PyFuncGenerator()
    # The split follows the hash of the function (its arguments and body), never its name.
    for task in train[:200] + test:
        args = task["canonical_solution"].split("(", 1)[1].split(")", 1)[0]
        body = "\n".join(line[4:] for line in task["canonical_solution"].splitlines()[1:])
        assert gen.in_test(f"{args}\n{body}") == (task.split == "test"), task.id


def test_gym_make_takes_the_pack_and_a_level():
    env = gym.make("grpo/CodeTests-v0", pack="pyfunc", level=1)
    _, info = env.reset(seed=3)
    assert info["pack"] == "pyfunc" and info["task_id"].startswith("pyfunc/L1-")
    assert env.unwrapped.pack.generator.level == 1
    env.close()
    assert CodeTestsEnv.default_pack == "humaneval"


def test_the_cli_lists_and_shows_the_pack_by_name(capsys):
    assert main(["list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.split()[:1] == ["pyfunc"])
    assert "grpo/CodeTests-v0" in line and "train unbounded" in line
    assert main(["show", "pyfunc", "--n", "2", "--option", "level=1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("grpo/CodeTests-v0, pack pyfunc ") and out.count("--- pyfunc/L1-") == 2


def test_strict_records_add_shown_answers_and_transforms():
    task = load_pack("pyfunc", level=1).task_at("train", 0)
    programs = task_baselines(task)
    answers = [t.rsplit(" == ", 1)[1] for t in task["tests"]]
    assert {f"the shown answer {a}" for a in answers[:N_SHOWN]} <= set(programs)
    assert f"the hidden answer {answers[N_SHOWN]}" in programs
    assert set(BASELINES) | set(TRANSFORMS) <= set(programs)
    plain = Task("p/1", "train", {k: v for k, v in task.fields.items()
                                  if k != "strict_baselines"})
    # Other packs get the families (constants, shown and hidden answers, argument transforms),
    # but not the arithmetic transforms.
    loose = task_baselines(plain)
    assert set(BASELINES) | {f"the shown answer {a}" for a in answers[:N_SHOWN]} <= set(loose)
    assert "the first argument's max" in loose and "the first argument is odd" in loose
    assert f"the hidden answer {answers[N_SHOWN]}" in loose
    assert set(loose) == set(programs) - set(TRANSFORMS)


# -- through the real env, in the Docker sandbox ----------------------------------------------
@pytest.fixture(scope="module")
def env(sandbox):
    env = gym.make("grpo/CodeTests-v0", pack="pyfunc", split="test", sandbox=sandbox).unwrapped
    yield env
    env.close()


@pytest.fixture(scope="module")
def test_tasks(env):
    return [env.pack.get(i) for i in env.pack.ids("test")]


@pytest.mark.docker
def test_every_canonical_solution_passes_its_hidden_cases(env, test_tasks):
    results = env.grade_many(test_tasks, [env.gold_completion(t) for t in test_tasks])
    for task, (_, info) in zip(test_tasks, results, strict=True):
        details = info["verdict"].details
        assert info["passed"] and info["rewards"]["tests"] == 1.0, (task.id, info["reason"])
        assert (details["n_hidden"], details["n_shown"]) == (N_HIDDEN, N_SHOWN)
        assert details["passed_shown"] == N_SHOWN


@pytest.fixture(scope="module")
def trivial_found(env, test_tasks):
    """``trivially_passed`` over every test task, run once for the module (the sweep takes
    most of a minute on 2 cores): the test below reads it, and ``validate`` is handed it."""
    return env.trivially_passed(test_tasks)


@pytest.mark.docker
def test_no_trivial_program_earns_a_test_task(trivial_found):
    """Constants, the first argument and its empty value, the shown answers and the most common
    hidden answers as constants, and the transforms (negation, abs, +1, *2, len, sorted, reversed, ...):
    none passes every hidden case of any test task of any level."""
    assert trivial_found == {}


@pytest.mark.docker
def test_the_trivial_check_finds_what_it_should(env, test_tasks):
    """The strict check is not vacuous: tasks rewritten so that a shown answer, a transform or
    a constant pays their hidden cases are found, naming that program."""
    def rewrite(task: Task, answers: list, what: str) -> Task:
        name = task["entry_point"]
        inputs = [t.split(f"assert {name}(", 1)[1].rsplit(") == ", 1)[0] for t in task["tests"]]
        tests = [f"assert {name}({x}) == {a!r}" for x, a in zip(inputs, answers, strict=True)]
        return Task(f"{task.id}-{what}", "test", {**task.fields, "tests": tests,
                                                  "shown_tests": tests[:N_SHOWN]})

    level1 = next(t for t in test_tasks if t["level"] == 1)
    xs = [int(t.split("(", 1)[1].split(")", 1)[0]) for t in level1["tests"]]
    words = next(t for t in test_tasks if t["level"] == 5)
    ws = [ast.literal_eval(t.split("(", 1)[1].rsplit(") == ", 1)[0]) for t in words["tests"]]
    found = env.trivially_passed([
        rewrite(level1, [x + 1 for x in xs], "plus1"),
        rewrite(level1, [7, 9] + [7] * N_HIDDEN, "shown"),
        rewrite(level1, [7, 9] + [5] * N_HIDDEN, "constant"),
        rewrite(words, [w[::-1] for w in ws], "reversed"),
        rewrite(words, [len(w) for w in ws], "len"),
    ])
    assert found[f"{level1.id}-plus1"] == ["the first argument plus 1"]
    assert found[f"{level1.id}-shown"] == ["the shown answer 7", "the hidden answer 7"]
    assert found[f"{level1.id}-constant"] == ["the hidden answer 5"]
    assert "the first argument reversed" in found[f"{words.id}-reversed"]
    assert "the first argument's length" in found[f"{words.id}-len"]
    assert len(found) == 5


@pytest.mark.docker
def test_wrong_programs_earn_nothing(env, test_tasks):
    task = next(t for t in test_tasks if t["level"] == 1)
    name, shown = task["entry_point"], task["shown_tests"]
    arg = task["canonical_solution"].split("(", 1)[1].split(")", 1)[0]  # x or n
    gold_body = task["canonical_solution"].split("return ", 1)[1].strip()
    hard_coded = "".join(f"    if {arg} == {t.split('(', 1)[1].split(')', 1)[0]}:\n"
                         f"        return {t.rsplit(' == ', 1)[1]}\n" for t in shown)
    programs = {
        "off by one": f"def {name}({arg}):\n    return {gold_body} + 1\n",
        "the shown examples hard-coded": f"def {name}({arg}):\n{hard_coded}    return None\n",
        "another function's name": f"def other({arg}):\n    return {gold_body}\n",
    }
    results = env.grade_many([task] * len(programs),
                             [f"```python\n{p}```" for p in programs.values()])
    for what, (_, info) in zip(programs, results, strict=True):
        assert not info["passed"] and info["rewards"]["tests"] == 0.0, (what, info["reason"])
    # ...while the hard-coded program does pass the cases the prompt shows.
    assert results[1][1]["verdict"].details["passed_shown"] == N_SHOWN


@pytest.mark.docker
def test_validate_passes_by_the_pack_name(capsys, sandbox, monkeypatch, test_tasks,
                                          trivial_found):
    import envs.sandboxes

    monkeypatch.setattr(envs.sandboxes, "_shared", sandbox)
    # validate's trivial-program check covers the test split and a train sample: the test
    # split's results are the module's sweep (the same tasks, the same programs, the same
    # sandbox), only the rest is run here. A task validate built otherwise is run again.
    swept = {t.id: t.fields for t in test_tasks}
    real = CodeTestsEnv.trivially_passed

    def trivially_passed(self, tasks):
        known = {t.id for t in tasks if swept.get(t.id) == t.fields}
        found = real(self, [t for t in tasks if t.id not in known])
        return {**found, **{tid: n for tid, n in trivial_found.items() if tid in known}}

    monkeypatch.setattr(CodeTestsEnv, "trivially_passed", trivially_passed)
    # Six tasks of the unbounded train split, one of each level (the mixed pack cycles them);
    # the command's default sample (1000) is its own run's job.
    code = main(["validate", "--sample", "6", "pyfunc"])
    out = capsys.readouterr().out
    assert code == 0, out
    n = 6 + load_pack("pyfunc").size("test")
    assert f"note: trivial programs checked on {n} tasks" in out
    assert f"OK: pack 'pyfunc' (grpo/CodeTests-v0): {n} tasks checked" in out
    assert f"{n} golds well-formed and accepted by their own verifier" in out


def _off_by_one(source: str) -> list[str]:
    """The reference with one comparison's boundary moved (``>=`` -> ``>``, ``<=`` -> ``<``,
    ``>`` -> ``>=``, ``<`` -> ``<=``), one program per comparison in it."""
    swaps = {">=": ">", "<=": "<", ">": ">=", "<": "<="}
    out = []
    for m in re.finditer(r"(?<![<>=!])(>=|<=|>|<)(?!=)", source):
        out.append(source[:m.start()] + swaps[m.group()] + source[m.end():])
    return out


def test_an_off_by_one_comparison_fails_a_hidden_case_on_every_test_task():
    """A threshold or a range end is always among the hidden cases: ``n > 8`` for "at least 8"
    was credited on pyfunc 1.0.0, whose random inputs missed 8 itself."""
    pack = load_pack("pyfunc", level=3)
    # The forms where moving the boundary changes the function (in ``min`` or a cap at ``hi``
    # it does not: ``a <= b`` picks the same value as ``a < b``).
    boundary_forms = {"bump", "size_word", "in_range", "sign"}
    checked = 0
    for i in range(pack.size("test")):
        task = pack.task_at("test", i)
        if task["form"] not in boundary_forms:
            continue
        hidden = [t for t in task["tests"] if t not in task["shown_tests"]]
        for program in _off_by_one(task["canonical_solution"]):
            scope: dict = {}
            exec(program, scope)  # noqa: S102 - our own reference, one operator changed
            passed = 0
            for case in hidden:
                try:
                    exec(case, scope)  # noqa: S102
                    passed += 1
                except AssertionError:
                    pass
            assert passed < len(hidden), (task.id, program)
            checked += 1
    assert checked >= 20  # the level has threshold forms, and they were checked


def test_the_generators_check_mirrors_the_fallback_programs():
    """A transform that falls back to a constant or a shown answer where it raises is a
    trivial payer for the generator too (``envs.domains.code_tests.fallback_baselines``)."""
    from tasks.pyfunc.trivial import trivial_payers

    hidden = [(([3, 1, 5],), 3), (([],), False), (([7],), 7)]
    assert "argument 1 first item, else False" in trivial_payers(hidden)
    hidden = [(([3, 1, 5],), 3), (([],), -4), (([7],), 7)]
    assert trivial_payers(hidden) == []
    assert trivial_payers(hidden, shown_answers=[-4]) == ["argument 1 first item, else -4"]


def _hidden_cases(task: Task) -> list[tuple[tuple, object]]:
    out = []
    for test in task["tests"]:
        if test in task["shown_tests"]:
            continue
        call = ast.parse(test).body[0].test
        out.append((tuple(ast.literal_eval(a) for a in call.left.args),
                    ast.literal_eval(call.comparators[0])))
    return out


def _sample():
    pack = load_pack("pyfunc")
    return [pack.get(i) for i in pack.ids("test")] + [pack.task_at("train", i)
                                                      for i in range(240)]


def test_every_form_declares_edges_and_every_task_tests_them():
    """Zero, a threshold and its neighbour, the ends of a range, the empty input: each form
    names its edges, and they are among the hidden cases of every task drawn."""
    import random

    from tasks.pyfunc import FORMS, _cases, _reference, _source

    rng = random.Random(7)
    for forms in FORMS.values():
        for form in forms:
            drawn = 0
            for _ in range(40):
                params = form.params(rng)
                edges = form.edges(params)
                assert edges, form.names[0]
                body = form.body.format(**params)
                got = _cases(form, params, _reference(form.args, body),
                             _source("ref", form.args, body), rng)
                if got is None:  # redrawn by draw_task
                    continue
                hidden = [args for args, _ in got[0][N_SHOWN:]]
                assert all(e in hidden for e in edges), (form.names[0], params, hidden)
                drawn += 1
                if drawn == 3:
                    break
            assert drawn == 3, form.names[0]


def test_every_mutant_fails_a_hidden_case_and_parity_tests_zero():
    """Each task's ``mutants`` (its reference with one edge broken) answer a hidden case
    wrong; ``n % 2 == 0 and n != 0``, paid in full on 39 of 42 parity tasks of pyfunc 1.2.0,
    fails every parity task now."""
    no_zero = ("def {name}(n):\n    if n % 2 == 0 and n != 0:\n        return 'even'\n"
               "    return 'odd'\n")
    parity = 0
    for task in _sample():
        hidden = _hidden_cases(task)
        programs = [m["program"] for m in task["mutants"]]
        if task["form"] == "parity":
            parity += 1
            programs.append(no_zero.format(name=task["entry_point"]))
            assert any(args == (0,) for args, _ in hidden), task.id
        for program in programs:
            scope: dict = {}
            exec(program, scope)  # noqa: S102 - our own reference, one edit
            fn = scope[task["entry_point"]]
            wrong = 0
            for args, expected in hidden:
                try:
                    wrong += fn(*args) != expected
                except Exception:  # noqa: BLE001
                    wrong += 1
            assert wrong, (task.id, program)
    assert parity >= 10


def test_no_shallow_program_answers_more_than_half_and_outcomes_are_balanced():
    """``return True`` earned 0.83 of "divisible by 7" and "between 17 and 29" and
    ``return n`` 0.5 of "cap at 31" on pyfunc 1.2.0. Now every True/False task has as many
    of each among its hidden cases, and no constant, shown answer, transform or transform
    with a fallback answers more than half of them."""
    from tasks.pyfunc.trivial import shallow_matches

    booleans = 0
    for task in _sample():
        hidden = _hidden_cases(task)
        answers = [a for _, a in hidden]
        if all(type(a) is bool for a in answers):
            booleans += 1
            assert answers.count(True) == answers.count(False), task.id
        shown = [ast.literal_eval(t.rsplit(" == ", 1)[1]) for t in task["shown_tests"]]
        most = max(bin(m).count("1") for m in shallow_matches(hidden, answers + shown))
        assert most <= N_HIDDEN // 2, task.id
        # ...and the input itself, where it is one value (cap at hi: `return n`).
        assert sum(args[0] == a for args, a in hidden) <= N_HIDDEN // 2, task.id
    assert booleans >= 20


#: Programs that know nothing of the task, tried as an attacker would (none is among the
#: families of ``task_baselines``): each may earn at most half of a task's hidden cases.
ATTACKS = {
    "parity as the answer": "return args[0] % 2 == 0",
    "truthiness": "return bool(args[0])",
    "positive": "return args[0] > 0",
    "a constant chosen by the argument's type": (
        "return True if isinstance(args[0], int) else ('' if isinstance(args[0], str) else [])"),
    "an exception swallowed into True": (
        "try:\n        return args[0][0] > 0\n    except Exception:\n        return True"),
    "zero special-cased": "return 0 if args[0] == 0 else args[0]",
    "a long list": "return len(args[0]) > 3",
}


@pytest.mark.docker
def test_attacks_earn_at_most_half_of_the_hidden_cases(env, test_tasks):
    """The attacks above, and the shown inputs hard-coded with True (or the first shown answer)
    for every other input, on two test tasks of each True/False or threshold form, graded in
    the sandbox. ``len(nums) > 3`` earned 0.83 on a ``contains`` task before its lists were
    drawn with and without the value at every length."""
    forms = ("divisible", "in_range", "size_word", "cap", "parity", "is_palindrome",
             "has_letter", "contains")
    tasks = [t for form in forms for t in [t for t in test_tasks if t["form"] == form][:2]]
    assert len(tasks) >= 12
    for task in tasks:
        bodies = dict(ATTACKS)
        shown = [(t.split("(", 1)[1].rsplit(") == ", 1)[0], t.rsplit(" == ", 1)[1])
                 for t in task["shown_tests"]]
        lines = "".join(f"if args[0] == {x}:\n        return {a}\n    " for x, a in shown)
        bodies["the shown inputs hard-coded, else True"] = lines + "return True"
        bodies["the shown inputs hard-coded, else a shown answer"] = lines + f"return {shown[0][1]}"
        scores = env.shallow_scores(task, bodies)
        assert max(scores.values()) <= 0.5, (task.id, scores)
