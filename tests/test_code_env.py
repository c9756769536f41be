"""grpo/CodeTests-v0 and its packs; grading runs in the real sandbox."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the grpo/* envs
from envs.base import is_infra_error
from envs.domains.code_tests import CodeTestsEnv, mutant_programs
from envs.verify.code import extract_program, shown_cases
from sandbox import Sandbox
from sandbox.harness import find_entry_points, run_tests, run_variants
from tasks import Task, amplify, load_pack
from tasks.humaneval import (
    AMPLIFIED,
    KEPT_OVER_HALF,
    PAYABLE_BY_A_CONSTANT,
    PAYABLE_BY_A_SHALLOW_PROGRAM,
)
from tasks.humaneval import shown_cases as humaneval_shown_cases
from tasks.mbpp import AMPLIFIED as MBPP_AMPLIFIED
from tasks.mbpp import NOT_GRADABLE, RESTORABLE
from tasks.mbpp import PAYABLE_BY_A_SHALLOW_PROGRAM as MBPP_SHALLOW


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n"


# -- no docker needed --------------------------------------------------------------------------
def test_extract_program_takes_the_last_python_block():
    text = "```python\nx = 1\n```\nthen\n```py\ny = 2\n```\n"
    assert extract_program(text) == ("y = 2\n", True)
    assert extract_program("```\nz = 3\n```") == ("z = 3\n", True)
    assert extract_program("def f(): pass") == ("def f(): pass", False)


def test_an_answer_ends_with_its_first_fenced_block():
    env = CodeTestsEnv.__new__(CodeTestsEnv)  # answer_end reads no state: no sandbox started
    block = "```python\ndef f(n):\n    return n + 1\n```"
    for unfinished in ("", "Here it is:\n```python\ndef f(n):\n    return n", "def f(n): pass",
                       "```python def f(n): pass```"):  # no newline after the tag: no block
        assert env.answer_end(unfinished) is None
    said = "Sure:\n" + block
    assert env.answer_end(said) == len(said)
    # What follows the block, prose or a second block (which extract_program would grade
    # instead of the function), is past the end.
    text = said + "\n\nThis adds one.\n```python\nprint(f(1))\n```"
    end = env.answer_end(text)
    assert text[:end] == said and extract_program(text[:end])[0] == "def f(n):\n    return n + 1\n"
    assert env.answer_end("```\nx = 1\n``` and more") == len("```\nx = 1\n```")  # untagged


def test_a_mutant_that_does_not_parse_is_a_clear_error_not_a_silent_pass():
    """All of a task's mutants run in one job: one that does not compile would fail the
    others too, and ``validate`` would see no mutant pass."""
    env = CodeTestsEnv.__new__(CodeTestsEnv)  # raises before any sandbox is needed
    broken = {"edit": "1 -> 2", "program": "def f(x):\n  return x +"}
    task = Task("p/1", "train", {"tests": ["assert f(1) == 2"], "entry_point": "f",
                                 "mutants": [broken]})
    with pytest.raises(ValueError, match=r"p/1: the reference with 1 -> 2: the program does not "
                                         r"parse"):
        env.variant_scores(task, mutant_programs(task))


def test_the_reward_is_at_most_the_unpublished_share():
    """HumanEval's and MBPP's own cases are public: a lookup table of them passes them all.
    With unpublished (amplified) cases, the reward is at most the share of those passed, so
    the table earns what its fallback earns there; ``passed`` still needs every case."""
    from envs.verify.code import fraction as _fraction
    from envs.verify.code import verdict as _verdict
    from sandbox.harness import TestReport

    # 0 shown, 1-3 own (public) hidden cases, 4-7 unpublished
    table_else_constant = TestReport(8, passed=[0, 1, 2, 3, 4, 6], record_found=True,
                                     compiles=True, loaded=True)
    assert _fraction(table_else_constant, [0]) == pytest.approx(5 / 7)
    assert _fraction(table_else_constant, [0], [4, 5, 6, 7]) == 0.5
    verdict = _verdict(table_else_constant, "", [0], [4, 5, 6, 7])
    assert not verdict.passed and verdict.score == 0.5
    assert verdict.details["passed_unpublished"] == 2 and verdict.details["n_unpublished"] == 4
    # an honest program that misses public cases is paid their share, not more
    honest = TestReport(8, passed=[0, 1, 4, 5, 6, 7], record_found=True, compiles=True,
                        loaded=True)
    assert _fraction(honest, [0], [4, 5, 6, 7]) == pytest.approx(5 / 7)
    gold = TestReport(8, passed=list(range(8)), record_found=True, compiles=True, loaded=True)
    assert _verdict(gold, "", [0], [4, 5, 6, 7]).passed


#: The most tasks a pack may lose to the memorised-public-cases rule (see the summary).
MAX_OUT, MBPP_MAX_OUT = 5, 40


def test_packs_have_all_problems_with_stable_splits():
    he = load_pack("humaneval")
    ids = set(he.ids("train")) | set(he.ids("test"))
    # Tasks a constant or another shallow program earns on their own cases left the pack; they
    # are back where the amplified cases fail every shallow program (``safe``): all of them,
    # len(s) and max(l) too, the builtins asked (the answer by another route).
    left_out = PAYABLE_BY_A_CONSTANT | PAYABLE_BY_A_SHALLOW_PROGRAM
    assert left_out >= {"40", "54", "34", "58", "72", "23", "35"}
    stored = amplify.read(AMPLIFIED)
    still_out = {i for i in left_out if not amplify.restored(stored, i)}
    assert still_out == set()
    # and those where a table of the public cases, with a shallow fallback, still earns over
    # half (``left_out`` in the file, with the reason)
    memorised_out = {i for i in stored["tasks"] if amplify.left_out_reason(stored, i)}
    assert memorised_out == set(stored["summary"]["left_out"]) and len(memorised_out) <= MAX_OUT
    memorised_out -= KEPT_OVER_HALF
    assert ids == {f"humaneval/{i}" for i in range(164) if str(i) not in still_out | memorised_out}
    assert he.size("test") > 0 and he.size("train") > he.size("test")
    mbpp = load_pack("mbpp")
    ids = set(mbpp.ids("train")) | set(mbpp.ids("test"))
    left_out = NOT_GRADABLE | MBPP_SHALLOW
    assert left_out >= {"367", "404", "508", "62", "164", "203", "502"}
    stored = amplify.read(MBPP_AMPLIFIED)
    still_out = {i for i in left_out if not amplify.restored(stored, i)}
    still_out |= NOT_GRADABLE - RESTORABLE  # never graded, amplified or not
    assert {"367", "404"} <= still_out
    # every task dropped as shallow-payable is back: mbpp/54 and 225 under a hand-written
    # precondition (tasks/mbpp/preconditions.py), mbpp/105 with deeper probes
    assert not {"54", "62", "105", "141", "164", "203", "225", "502", "508"} & still_out
    assert not MBPP_SHALLOW & still_out
    memorised_out = {i for i in stored["tasks"] if amplify.left_out_reason(stored, i)}
    assert len(memorised_out) <= MBPP_MAX_OUT
    assert ids == {f"mbpp/{i}" for i in range(11, 511) if str(i) not in still_out | memorised_out}
    # mbpp/347 repeats mbpp/76's prompt with other answers: only mbpp/76 is graded
    assert "mbpp/76" in ids and "mbpp/347" not in ids
    task = mbpp.get("mbpp/11")
    prompt = mbpp.prompt(task)
    assert task["example"] in prompt and task["shown_tests"] == [task["example"]]
    added = amplify.amplified_tests(amplify.read(MBPP_AMPLIFIED), "11")
    assert task["tests"][0] == task["example"] and len(task["tests"]) == 3 + len(added)
    assert all(t not in prompt for t in task["tests"][1:])
    assert "MIT" in he.manifest.license and "CC-BY-4.0" in mbpp.manifest.license


def test_humaneval_check_is_split_into_cases():
    he = load_pack("humaneval")
    task = he.get("humaneval/0")
    stored = amplify.read(AMPLIFIED)
    assert len(task["tests"]) == 7 + len(amplify.amplified_tests(stored, "0"))
    assert all(t.startswith("assert candidate(") for t in task["tests"])
    # The trusted set-up is the prompt (its helpers, pristine) and the tests' module code.
    assert task["setup"].startswith(task["prompt"]) and task["entry_point"] == "has_close_elements"
    assert "def encode_cyclic" in he.get("humaneval/38")["setup"]
    # ``assert True`` is not a test case: every program would pass it.
    assert "assert True" not in he.get("humaneval/70")["tests"]
    assert len(he.get("humaneval/70")["tests"]) == 9 + len(amplify.amplified_tests(stored, "70"))


def test_humaneval_shown_tests_are_the_docstring_examples():
    he = load_pack("humaneval")
    # ``>>> pairs_sum_to_zero([1, 3, 5, 0])`` ... : the first five of its cases are shown.
    task = he.get("humaneval/43")
    assert task["shown_tests"] == task["tests"][:5] and len(task["tests"]) > 5
    # Other styles: ``solve("ab") = "AB"``, ``strange_sort_list([]) == []``.
    assert "assert candidate('ab') == 'AB'" in he.get("humaneval/161")["shown_tests"]
    assert "assert candidate([]) == []" in he.get("humaneval/70")["shown_tests"]
    # humaneval/53 shows add(2, 3); the case with random inputs is hidden.
    task = he.get("humaneval/53")
    assert len(task["shown_tests"]) == 2 and "random.randint" not in "".join(task["shown_tests"])
    # Cases computing their input (``candidate(3 * 19)``) or with unseen inputs are hidden.
    assert he.get("humaneval/25")["shown_tests"] == ["assert candidate(8) == [2, 2, 2]"]
    ids = he.ids("train") + he.ids("test")
    # 120: humaneval/157 and 39, which show examples, left the pack (their memorised public
    # cases pay a shallow program over half: ``left_out`` in tasks/humaneval/amplified.json),
    # and 23 and 35, which show theirs, came back (``len`` and ``max`` are their answers).
    assert sum(bool(he.get(i)["shown_tests"]) for i in ids) == 120


def test_humaneval_examples_in_prose_and_with_brackets_in_strings_are_shown():
    """humaneval/84 writes its examples in prose ("For N = 1000, ... the output should be "1""),
    and humaneval/119's arguments hold brackets (``match_parens([')', ')']) == 'No'``):
    before, neither counted as shown, and a program that memorised the docstring earned 0.70
    and 0.645 there."""
    he = load_pack("humaneval")
    task = he.get("humaneval/84")
    assert task["shown_tests"] == task["tests"][:3]
    task = he.get("humaneval/119")
    assert task["shown_tests"] == task["tests"][:2]
    # Prose with the input and the output: "For lst = [1,2,3] the output should be 14".
    assert len(he.get("humaneval/133")["shown_tests"]) == 4
    # ``correct_bracketing(")(()")`` shows the brackets case of humaneval/61.
    assert "assert not candidate(')(()')" in he.get("humaneval/61")["shown_tests"]
    # ``is_happy(abcd) => True``: a bare word is the string it spells.
    assert "assert candidate('abcd') == True, 'abcd'" in he.get("humaneval/80")["shown_tests"]


def test_shown_case_detection_reads_the_prompt_as_code_and_prose():
    prompt = ("def f(s, n):\n"
              "    \"\"\"Examples:\n"
              "    f(')(', 2) == 'No'\n"
              "    f(\"[(]\", 1) ➞ 'Yes'\n"
              "    For s = 'ab' and n = 3, the answer is 'abab'.\n"
              "    If s = 'xy'\n"
              "    and n = 0, return ''.\n"
              "    The output 'cd' comes before s = 'cd', n = 1.\n"
              "    \"\"\"\n")
    cases = ["assert candidate(')(', 2) == 'No'", "assert candidate('[(]', 1) == 'Yes'",
             "assert candidate('ab', 3) == 'abab'", "assert candidate('xy', 0) == ''",
             "assert candidate('cd', 1) == 'cd'", "assert candidate('ab', 4) == 'abab'",
             "assert candidate(')(', 3) == 'No'"]
    # The first four are shown; in the fifth the answer is written before the input, the
    # sixth's input and the last one's are not written at all.
    assert humaneval_shown_cases(prompt, "f", cases) == cases[:4]
    # Typographic quotes read as quotes; an apostrophe opens no string.
    prompt = 'def g(n):\n    """For n = 5 the output is \u201c101\u201d; don\u2019t fret."""\n'
    cases = ["assert candidate(5) == '101'", "assert candidate(6) == 't fret.'"]
    assert humaneval_shown_cases(prompt, "g", cases) == cases[:1]


def test_shown_cases_match_as_parsed_code():
    tests = ["assert f(1)==2", "assert f(2) == 3", "assert f(1) == 2  # again"]
    assert shown_cases(tests, ["assert f(1) == 2"]) == [0, 2]
    assert shown_cases(tests, []) == []
    with pytest.raises(TypeError):
        shown_cases(tests, "assert f(1) == 2")


def test_entry_points_are_the_names_the_tests_call_and_nothing_defines():
    assert find_entry_points(["assert f(1) == 2", "assert g(f(1)) == h"]) == ["f", "g"]
    # Builtins, the set-up's own helpers and the test's own names stay in the trusted process.
    assert find_entry_points(["assert abs(f(1) - 2) < 1e-6"]) == ["f"]
    assert find_entry_points(["assert helper(f(1))"], setup="def helper(x):\n    return x") == [
        "f"]
    assert find_entry_points(["g = lambda x: x\nassert g(f(1))"]) == ["f"]
    assert find_entry_points(["assert candidate(1) == 2"]) == []
    # A function named like a builtin must be declared (mbpp/126's ``sum``).
    assert load_pack("mbpp").get("mbpp/126")["entry_point"] == ["sum"]


# -- grading in the sandbox --------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(sandbox):
    return CodeTestsEnv(pack="humaneval", sandbox=sandbox)


@pytest.mark.docker
def test_every_humaneval_canonical_solution_passes_and_empty_bodies_fail(env):
    tasks = [env.pack.get(i) for i in env.pack.ids("train") + env.pack.ids("test")]
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
    stored = amplify.read(MBPP_AMPLIFIED)
    out = {int(i) for i in MBPP_SHALLOW} | {int(i) for i in stored["tasks"]
                                             if amplify.left_out_reason(stored, i)}
    ids = sorted({*range(11, 511, 10), 40, 88} - out)
    tasks = [env.pack.get(f"mbpp/{i}") for i in ids]
    results = env.grade_many(tasks, [fenced(t["canonical_solution"]) for t in tasks])
    failed = [t.id for t, (_, info) in zip(tasks, results, strict=True) if not info["passed"]]
    assert failed == []


@pytest.mark.docker
def _own_cases(task: Task) -> Task:
    """``task`` with its own (HumanEval) cases only, without the amplified ones."""
    added = len(amplify.amplified_tests(amplify.read(AMPLIFIED), task.id.split("/")[1]))
    return Task(task.id, task.split, {**task.fields, "tests": task["tests"][:-added or None]})


def test_partial_credit_is_per_case(env):
    task = _own_cases(env.pack.get("humaneval/0"))
    # Always True passes exactly the cases expecting True (4 of 7).
    r, info = env.score(task, fenced(
        "def has_close_elements(numbers, threshold):\n    return True\n"))
    assert info["rewards"]["tests"] == pytest.approx(4 / 7)
    assert info["reason"] == "failed_tests" and not info["passed"]
    assert r == pytest.approx(4 / 7 + 0.1)
    reasons = info["verdict"].details["case_reasons"]
    assert sorted(reasons.values()) == ["failed"] * 3 + ["passed"] * 4


@pytest.mark.docker
def test_a_case_that_kills_the_program_leaves_the_next_cases_a_fresh_one(env):
    task = _own_cases(env.pack.get("humaneval/0"))
    # The first call ends the program's process; the others are answered by a fresh one.
    program = ("import os\n"
               "def has_close_elements(numbers, threshold):\n"
               "    if not os.path.exists('killed'):\n"
               "        open('killed', 'w').close()\n        os._exit(0)\n"
               "    return True\n")
    _, info = env.score(task, fenced(program))
    reasons = info["verdict"].details["case_reasons"]
    # Cases 0-6 expect True, False, True, False, True, True, False.
    assert reasons == {"0": "program_exited", "1": "failed", "2": "passed", "3": "failed",
                       "4": "passed", "5": "passed", "6": "failed"}
    assert info["rewards"]["tests"] == pytest.approx(3 / 7)


@pytest.mark.docker
def test_a_hanging_program_costs_one_timeout_not_one_per_case(env):
    """``while True: pass`` on humaneval/136 (11 cases) waited for 10 timeouts, 30 s, each case
    timing out on its own (the 11th was cut by the run's budget). Now the first timeout fails
    the remaining cases at once (``not_run``); the verdict is the same: no case passes."""
    task = env.pack.get("humaneval/136")
    hang = fenced("def largest_smallest_integers(lst):\n    while True:\n        pass\n")
    env2 = CodeTestsEnv(pack="humaneval", sandbox=env.sandbox, per_test_s=1.0)
    _, info = env2.score(task, hang)
    reasons = list(info["verdict"].details["case_reasons"].values())
    assert reasons == ["timeout"] + ["not_run"] * (len(task["tests"]) - 1)
    assert info["rewards"]["tests"] == 0.0 and not info["passed"]
    assert info["reason"] == "timeout" and info["hit_time_limit"] is True
    # A program that hangs only on a later case keeps the cases before it.
    later = fenced("CALLS = []\ndef largest_smallest_integers(lst):\n    CALLS.append(1)\n"
                   "    if len(CALLS) == 3:\n        while True:\n            pass\n"
                   "    negatives = [x for x in lst if x < 0]\n"
                   "    positives = [x for x in lst if x > 0]\n"
                   "    return (max(negatives) if negatives else None,\n"
                   "            min(positives) if positives else None)\n")
    _, info = env2.score(task, later)
    reasons = list(info["verdict"].details["case_reasons"].values())
    assert reasons == ["passed", "passed", "timeout"] + ["not_run"] * (len(task["tests"]) - 3)


@pytest.mark.docker
def test_a_variant_that_hangs_leaves_the_next_variant_every_case(sandbox):
    """The cases after a timeout are skipped within one variant only: the next variant (another
    shallow program graded in the same job) starts a fresh process and runs every case."""
    program = ("def hang(x):\n    while True:\n        pass\n"
               "def double(x):\n    return 2 * x\n")
    tests = [f"assert f({x}) == {2 * x}" for x in range(4)]
    hung, fine = run_variants(sandbox, program, tests, [{"f": "hang"}, {"f": "double"}],
                              entry_points=["f"], per_test_s=1.0)
    assert hung.reasons == {0: "timeout", 1: "not_run", 2: "not_run", 3: "not_run"}
    assert fine.passed == [0, 1, 2, 3]


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
}
#: Programs that never end loading: they use up the run's whole budget (30 s on humaneval/0's
#: 19 cases), so they are graded on 3 of its cases at 1 s a case (a 6.5 s budget): the same
#: path, a budget spent before any case ran.
HANGING_CHEATS = {
    "infinite_loop": "while True:\n    pass\n",
    "flood_output": "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
}


@pytest.mark.docker
def test_cheating_programs_score_zero(env):
    task = env.pack.get("humaneval/0")
    short = Task(task.id, task.split, {**task.fields, "tests": task["tests"][:3]})
    quick = CodeTestsEnv(pack="humaneval", sandbox=env.sandbox, per_test_s=1.0)
    names = list(CHEATS) + list(HANGING_CHEATS)
    results = env.grade_many([task] * len(CHEATS), [fenced(CHEATS[n]) for n in CHEATS])
    results += quick.grade_many([short] * len(HANGING_CHEATS),
                                [fenced(HANGING_CHEATS[n]) for n in HANGING_CHEATS])
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
    with pytest.warns(RuntimeWarning, match="sandbox is closed"):
        _, info = env2.score("humaneval/0",
                             fenced(env2.pack.get("humaneval/0")["canonical_solution"]))
    assert info["reason"] == "sandbox_error"
    assert info["verdict"].details["sandbox_error"] is True
    assert info["infra_error"] is True and is_infra_error(info)


def test_no_engine_warns_once_per_env_and_marks_the_info(monkeypatch, tmp_path):
    import envs.sandboxes

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setattr(envs.sandboxes, "_shared", None)
    env = CodeTestsEnv(pack="mbpp")
    solution = fenced(env.pack.get("mbpp/11")["canonical_solution"])
    with pytest.warns(RuntimeWarning, match="python -m sandbox doctor") as caught:
        for _ in range(3):
            env.reset(options={"task_id": "mbpp/11"})
            _, reward, terminated, _, info = env.step(solution)
            assert reward == 0.0 and terminated
            assert info["infra_error"] is True and is_infra_error(info)
            assert "no-engine.sock" in info["verdict"].details["error"]
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    with pytest.warns(RuntimeWarning):  # another env warns again
        CodeTestsEnv(pack="mbpp").score("mbpp/11", solution)


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


# -- shown tests -------------------------------------------------------------------------------
def _task(tests: list[str], shown: list[str]) -> Task:
    return Task("synthetic/1", "test", {"tests": tests, "shown_tests": shown})


@pytest.mark.docker
def test_shown_tests_earn_nothing(env):
    task = _task(["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"],
                 shown=["assert f(1)==2"])
    hard_coded = fenced("def f(x):\n    if x == 1:\n        return 2\n")
    honest = fenced("def f(x):\n    return x + 1\n")
    wrong_on_shown = fenced("def f(x):\n    return 0 if x == 1 else x + 1\n")
    (_, a), (_, b), (_, c) = env.grade_many([task] * 3, [hard_coded, honest, wrong_on_shown])
    assert a["rewards"]["tests"] == 0.0 and not a["passed"] and a["reason"] == "failed_tests"
    details = a["verdict"].details
    assert details["passed_cases"] == [0] and details["n_cases"] == 3
    assert details["shown_cases"] == [0]
    assert (details["passed_shown"], details["n_shown"]) == (1, 1)
    assert (details["passed_hidden"], details["n_hidden"]) == (0, 2)
    assert b["rewards"]["tests"] == 1.0 and b["passed"]
    # Only the hidden cases decide: the shown example is not graded either way.
    assert c["rewards"]["tests"] == 1.0 and c["passed"]
    assert c["verdict"].details["passed_shown"] == 0
    # When every case is shown, every case counts.
    _, info = env.score(_task(["assert f(1) == 2"], shown=["assert f(1) == 2"]), hard_coded)
    assert info["rewards"]["tests"] == 1.0 and info["passed"]


# -- the harness against programs that target it ----------------------------------------------
CHAMELEON = ("class Chameleon:\n    def __eq__(self, other):\n"
             "        return isinstance(other, (int, str, list, tuple, dict))\n"
             "    __hash__ = object.__hash__\n")
HARNESS_CHEATS = {
    # Objects whose own methods would decide a comparison or an assert.
    "always_less": ("class X:\n    def __sub__(self, o):\n        return self\n"
                    "    def __abs__(self):\n        return self\n"
                    "    def __lt__(self, o):\n        return True\n"
                    "def f(x):\n    return X()\n", "", ["assert abs(f(1) - 2) < 1e-6"]),
    "always_truthy": ("class T:\n    def __bool__(self):\n        return True\n"
                      "def f(x):\n    return T()\n", "", ["assert f(1)"]),
    "always_falsy": ("class F:\n    def __bool__(self):\n        return False\n"
                     "    def __len__(self):\n        return 0\n"
                     "def f(x):\n    return F()\n", "", ["assert not f(1)"]),
    "chameleon": (CHAMELEON + "def f(x):\n    return Chameleon()\n", "", ["assert f(1) == 2"]),
    "chameleon_inside_a_list": (CHAMELEON + "def f(x):\n    return [Chameleon()]\n", "",
                                ["assert f(1) == [2]"]),
    "chameleon_as_a_dict_value": (CHAMELEON + "def f(x):\n    return {'a': Chameleon()}\n", "",
                                  ["assert f(1) == {'a': 2}"]),
    "chameleon_outside_the_assert": (CHAMELEON + "def f(x):\n    return Chameleon()\n", "",
                                     ["ok = f(1) == 2\nassert ok"]),
    "list_subclass_with_eq": ("class L(list):\n    def __eq__(self, o):\n        return True\n"
                              "def f(x):\n    return L()\n", "", ["assert f(1) == [2]"]),
    # Patching what the harness or the test uses.
    "patch_bool": ("import builtins\nbuiltins.bool = lambda *a: True\n"
                   "def f(x):\n    return 0\n", "", ["assert f(1) == 2"]),
    "patch_abs_at_load": ("import builtins\nbuiltins.abs = lambda v: 0\n"
                          "def f(x):\n    return 7\n", "", ["assert abs(f(1) - 2) < 1e-6"]),
    "patch_abs_in_call": ("import builtins\ndef f(x):\n    builtins.abs = lambda v: 0\n"
                          "    return 7\n", "", ["r = f(1)\nassert abs(r - 2) < 1e-6"]),
    "shadow_abs": ("def abs(v):\n    return 0\ndef f(x):\n    return 7\n", "",
                   ["assert abs(f(1) - 2) < 1e-6"]),
    "shadow_range": ("def range(*a):\n    return []\ndef f(x):\n    return 0\n", "",
                     ["for i in range(3):\n    assert f(i) == i + 1"]),
    "patch_module_at_load": ("import math\nmath.isclose = lambda *a, **k: True\n"
                             "def f(x):\n    return 7\n", "import math",
                             ["assert math.isclose(f(1), 2)"]),
    "patch_module_in_call": ("import math\ndef f(x):\n    math.fabs = lambda v: 0.0\n"
                             "    return 7\n", "import math",
                             ["r = f(1)\nassert math.fabs(r - 2) < 1e-6"]),
    "replace_module": ("import sys, types\nm = types.ModuleType('math')\n"
                       "m.isclose = lambda *a, **k: True\nsys.modules['math'] = m\n"
                       "def f(x):\n    return 7\n", "import math",
                       ["assert math.isclose(f(1), 2)"]),
    "patch_loader_globals": ("import sys\nm = sys.modules['__main__']\n"
                             "m._strict_eq = m.strict_eq = lambda a, b: True\n"
                             "def f(x):\n    return 0\n", "", ["assert f(1) == 2"]),
    "steal_tokens_from_stdin": ("import json, os, sys\n"
                                "for line in sys.stdin.read().splitlines():\n"
                                "    try:\n        v = json.loads(line)\n    except ValueError:\n"
                                "        continue\n"
                                "    tokens = v.get('tokens', []) if isinstance(v, dict) else v\n"
                                "    os.write(int(sys.argv[1]), b'L\\n' + b''.join("
                                "b'P %s\\n' % t.encode() for t in tokens))\n"
                                "def f(x):\n    return 0\n", "", ["assert f(1) == 2"]),
}


@pytest.mark.docker
@pytest.mark.parametrize("name", list(HARNESS_CHEATS))
def test_harness_cheats_pass_no_case(sandbox, name):
    program, setup, tests = HARNESS_CHEATS[name]
    report = run_tests(sandbox, program, tests, setup=setup)
    assert report.record_found and report.loaded, report
    assert report.passed == [], report.errors


HARNESS_HONEST = {
    "counter": ("from collections import Counter\ndef f(s):\n    return Counter(s)\n", "",
                ["assert f('aab') == {'a': 2, 'b': 1}"]),
    "namedtuple": ("from collections import namedtuple\nP = namedtuple('P', 'x y')\n"
                   "def f(x):\n    return P(x, x + 1)\n", "", ["assert f(1) == (1, 2)"]),
    "list_subclass_with_methods": ("class L(list):\n    def total(self):\n"
                                   "        return sum(self)\n"
                                   "def f(x):\n    return L([x])\n", "", ["assert f(1) == [1]"]),
    "fraction": ("from fractions import Fraction\ndef f(x):\n    return Fraction(x, 2)\n", "",
                 ["assert f(1) == 0.5"]),
    "decimal": ("from decimal import Decimal\ndef f(x):\n    return Decimal(x) / 2\n", "",
                ["assert f(3) == 1.5"]),
    "truthiness": ("def f(x):\n    return [x] if x else []\n", "",
                   ["assert f(1)", "assert not f(0)", "assert f(0) == [] and f(2)"]),

    "own_abs_helper": ("def abs(v):\n    return v if v >= 0 else -v\n"
                       "def f(x):\n    return abs(x) + 1\n", "",
                       ["assert abs(f(-1) - 2) < 1e-6"]),
    "module_patch_outside_the_tests_modules": ("import string\nstring.x = 1\n"
                                               "def f(x):\n    return x\n", "import math",
                                               ["assert f(1) == 1"]),
}


@pytest.mark.docker
def test_harness_still_passes_honest_programs(sandbox):
    failed = {}
    for name, (program, setup, tests) in HARNESS_HONEST.items():
        report = run_tests(sandbox, program, tests, setup=setup)
        if report.passed != list(range(len(tests))):
            failed[name] = report.errors
    assert failed == {}
    # A function named like a builtin is the program's when the task declares it.
    report = run_tests(sandbox, "def sum(a, b):\n    return a - b\n", ["assert sum(10, 4) == 6"],
                       entry_points=["sum"])
    assert report.passed == [0]
    assert report.guarded  # the program ran under the signal filter, the judge non-dumpable


@pytest.mark.docker
def test_only_plain_data_crosses_and_what_cannot_fails_with_its_reason(sandbox):
    # An argument built from a class (mbpp/367's tree nodes) cannot be sent: the case fails
    # as argument_not_plain, whatever the program would have done.
    report = run_tests(sandbox, "def f(p):\n    return p.x\n",
                       ["assert f(P(1)) == 1"],
                       setup="class P:\n    def __init__(self, x):\n        self.x = x\n")
    assert report.passed == [] and report.reasons == {0: "argument_not_plain"}
    # Returned values outside the format fail as unserializable_return, one case each; the
    # exact values of the standard library that the format carries come back as themselves.
    program = ("import weakref, collections, types, fractions, decimal\n"
               "class Eq:\n    def __eq__(self, o):\n        return True\n"
               "KEEP = Eq()\n"
               "def nest(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
               "def f(k):\n"
               "    return {'proxy': lambda: weakref.proxy(KEEP),\n"
               "            'userlist': lambda: collections.UserList([1]),\n"
               "            'mapping': lambda: types.MappingProxyType({1: 2}),\n"
               "            'object': lambda: object(),\n"
               "            'deep': lambda: nest(300),\n"
               "            'fraction': lambda: fractions.Fraction(1, 3),\n"
               "            'decimal': lambda: decimal.Decimal('0.1'),\n"
               "            'generator': lambda: (i for i in range(3)),\n"
               "            'big': lambda: 3 ** 5000,\n"
               "            'huge': lambda: 'x' * (17 << 20)}[k]()\n")
    tests = ["assert f('proxy') == 1", "assert f('userlist') == [1]",
             "assert f('mapping') == {1: 2}", "assert f('huge') == ''",
             "assert f('deep')", "from fractions import Fraction\nassert f('fraction') == "
             "Fraction(1, 3) and type(f('fraction')) is Fraction",
             "from decimal import Decimal\nassert f('decimal') == Decimal('0.1')",
             "assert list(f('generator')) == [0, 1, 2]", "assert f('big') == 3 ** 5000"]
    report = run_tests(sandbox, program, tests)
    # Case 3's reply is larger than a message may be: the program's process is replaced, and
    # the next cases are answered by a fresh one.
    assert report.reasons == {0: "unserializable_return", 1: "unserializable_return",
                              2: "unserializable_return", 3: "unserializable_return",
                              4: "unserializable_return", 5: "passed", 6: "passed",
                              7: "passed", 8: "passed"}, report.errors
    assert "bytes (at most" in report.errors["3"]


@pytest.mark.docker
def test_the_program_cannot_signal_trace_or_read_the_judge(sandbox):
    judge = "int(open('/proc/self/stat').read().split(') ')[1].split()[1])"  # the parent's pid
    attempts = {
        "kill": f"os.kill({judge}, signal.SIGKILL)",
        "stop": f"os.kill({judge}, signal.SIGSTOP)",
        "kill_group": f"os.killpg({judge}, signal.SIGKILL)",
        "kill_everyone": "os.kill(-1, signal.SIGKILL)",
        "raw_syscall": f"ctypes.CDLL(None, use_errno=True).syscall(62, {judge}, 9) == 0 or "
                       "(_ for _ in ()).throw(OSError('refused'))",
        "read_memory": f"open('/proc/%d/mem' % {judge}, 'rb').read(1)",
        "read_stdin_fd": f"open('/proc/%d/fd/0' % {judge}, 'rb').read(1)",
        "read_environ": f"open('/proc/%d/environ' % {judge}, 'rb').read(1)",
        "lower_its_limits": f"resource.prlimit({judge}, resource.RLIMIT_CPU, (0, 0))",
        "renice_everyone": "os.setpriority(os.PRIO_USER, 0, 19)",
    }
    program = ("import ctypes, os, resource, signal\n"
               "def attempt(what):\n"
               "    try:\n"
               "        exec(what)\n"
               "    except OSError as exc:\n"
               "        return 'refused'\n"
               "    return 'done'\n")
    names = list(attempts)
    tests = [f"assert attempt({attempts[n]!r}) == 'refused'" for n in names]
    tests.append("assert attempt('pass') == 'done'")  # the judge is still there to ask
    report = run_tests(sandbox, program, tests)
    assert report.record_found and report.guarded
    assert [names[i] for i in range(len(names)) if i not in report.passed] == [], report.errors
    assert len(names) in report.passed


def test_a_main_block_is_not_flagged_since_it_never_runs():
    from envs.domains.code_flags import prints_or_touches_harness

    body = "def add(a, b):\n    return a + b\n"
    demo = ("\nif __name__ == '__main__':\n    import sys, unittest\n    print(add(1, 2))\n"
            "    unittest.main()\n    sys.exit(0)\n")
    assert prints_or_touches_harness(body + demo) == []
    # The same code outside the block, or with __name__ rebound first, is flagged.
    assert prints_or_touches_harness(body + "import sys\nsys.exit(0)\n")
    assert prints_or_touches_harness("__name__ = '__main__'\n" + body + demo)
    assert prints_or_touches_harness(body + "if __name__ != '__main__':\n    print(1)\n")
