"""The amplified HumanEval and MBPP hidden tests (issue 43, section 3): the input mutation keeps
the contract the seeds show, the case choice is the greedy one documented, the stored files
have their provenance, the left-out tasks are back only when safe, and (Docker, the real
engine) on a sample of amplified tasks the reference passes every case while the shallow
programs and the reference's mutants do not."""

from __future__ import annotations

import json
import random

import pytest

import tasks.humaneval as humaneval
import tasks.mbpp as mbpp
from tasks import amplify
from tasks.mutants import mutants

# -- pure parts -------------------------------------------------------------------------------


def test_seed_inputs_reads_literal_calls_only():
    cases = ["assert candidate([1, 2], 3) == 4", "assert candidate(x) == 1",
             "assert abs(candidate([1.5], 0) - 2.0) < 1e-6", "assert f(1) == candidate(2, 2)"]
    assert amplify.seed_inputs(cases, "candidate") == [([1, 2], 3), ([1.5], 0), (2, 2)]


def test_mutated_inputs_keep_the_seeds_contract():
    seeds = [([1, 3, 5], 2, "abc"), ([2, 4, 9, 11], 3, "cab"), ([7, 8], 1, "bb")]
    made = amplify.mutate_inputs(seeds, "t", pool=300)
    assert len(made) > 50
    assert not {repr(s) for s in seeds} & {repr(m) for m in made}
    for xs, k, s in made:
        assert xs and all(isinstance(x, int) and x >= 1 for x in xs)  # non-empty, positive
        assert xs == sorted(xs) and len(set(xs)) == len(xs)  # sorted and distinct, as seeds
        assert isinstance(k, int) and 1 <= k < len(xs)  # k >= 1 and k < len(xs), as seeds
        assert s and set(s) <= set("abc")  # the seeds' alphabet, never empty
    # and mutation does move every argument
    assert {len(m[0]) for m in made} - {2, 3, 4}
    assert {m[2] for m in made} - {"abc", "cab", "bb"}


def test_mutation_allows_what_a_seed_shows():
    seeds = [([], -3, ""), ([0, -1], 4, "x")]
    made = amplify.mutate_inputs(seeds, "t", pool=400)
    assert any(m[0] == [] for m in made) and any(m[2] == "" for m in made)
    assert any(m[1] < -3 for m in made) and any(m[1] > 4 for m in made)


def test_select_cases_kills_full_passers_then_halves_the_shallow():
    own = 2  # graded cases of the task itself
    a = amplify.Adversary("const", True, 2, "1100")   # passes both own cases
    b = amplify.Adversary("mutant", False, 2, "1011")  # passes both own cases
    c = amplify.Adversary("dead", False, 1, "0000")    # already fails one own case
    chosen = amplify.select_cases([a, b, c], own, [0, 1, 2, 3], max_added=4)
    # Both a and b pass everything: inputs 1, 2 and 3 each fail one of them and all fail c,
    # so the first (1) goes in and fails b; then 2 fails a. a still passes 3 of 4 graded
    # cases, over half: 3 goes in (3 of 5), and no input is left.
    assert chosen == [1, 2, 3]
    # without room, only the first
    assert amplify.select_cases([a, b, c], own, [0, 1, 2, 3], max_added=1) == [1]
    # a shallow program that passes in full gets a case it fails (1), then one more, to half
    d = amplify.Adversary("shallow", True, 2, "1000")
    assert amplify.select_cases([d], own, [0, 1, 2, 3], max_added=4) == [1, 2]
    # at half already: only up to MIN_GRADED (4) graded cases, those most adversaries fail
    e = amplify.Adversary("half", True, 1, "1000")
    assert amplify.select_cases([e], own, [0, 1, 2, 3], max_added=4) == [1, 2]
    assert amplify.select_cases([e], own, [0, 1, 2, 3], max_added=4, min_graded=2) == []


def test_render_case_compares_floats_within_a_tolerance():
    assert amplify.render_case("f", (1, "a"), [2]) == "assert f(1, 'a') == [2]"
    case = amplify.render_case("candidate", (2.0,), 1.5)
    assert case == "assert abs(candidate(2.0) - 1.5) <= 1.5e-06"


def test_extended_mutants_of_a_named_function_leave_the_rest_alone():
    source = ("def helper(x):\n    return x + 1\n\n\n"
              "def f(xs, k):\n    return [x for x in xs if x % 2 == 0][:k] + [min(xs)]\n")
    found = mutants(source, "f", extended=True)
    edits = {m.edit for m in found}
    assert "x % 2 == 0 -> x % 2 != 0" in edits
    assert "min -> max" in edits
    assert all("def helper(x):\n    return x + 1" in m.source for m in found)
    # the default (pyfunc's) kinds are unchanged: no operator or constant mutants
    assert {m.kind for m in mutants(source, "f")} <= {"off by one", "shifted", "swapped branch",
                                                      "zero case"}


# -- the stored files and the packs -------------------------------------------------------------
@pytest.mark.parametrize("module", [humaneval, mbpp], ids=["humaneval", "mbpp"])
def test_stored_file_has_provenance_and_a_summary(module):
    stored = amplify.read(module.AMPLIFIED)
    prov = stored["provenance"]
    # the command that made the file: its module before the re-layout, or now
    command = prov["generator"].split()
    assert command[:2] == ["python", "-m"] and command[2].endswith(".code_amplify")
    assert len(prov["source"]["sha256"]) == 64
    ids = {rec["id"] for _, rec in module.records()}
    assert set(stored["tasks"]) <= ids
    assert stored["summary"]["cases_added"] == sum(
        len(e.get("tests", [])) for e in stored["tasks"].values())
    after = stored["summary"]["after"]
    assert after["tasks_a_mutant_passes"] <= stored["summary"]["before"]["tasks_a_mutant_passes"]


def test_no_humaneval_task_is_paid_by_its_memorised_public_cases():
    """Every HumanEval task's own cases are public; with them as a lookup table and any
    shallow program behind it, a program passed 143 of 152 tasks in full before the amplified
    cases, and 48 with the first amplified file (``benchmarks/code_lookup_hack.py``). Now every
    task has an added case that each such program fails, but for the two left out (23, 35)
    and three known ones: humaneval/39 (its reference is too slow on any new input) and
    148 and 157 (mutated inputs rarely change their answer: no planet, not a right triangle)."""
    stored = amplify.read(humaneval.AMPLIFIED)
    paid = {n for n, e in stored["tasks"].items() if e.get("after", {}).get("memorised_in_full")}
    assert paid == {"23", "35", "39", "148", "157"}
    assert stored["summary"]["after"]["tasks_its_memorised_cases_pass"] == 5


def test_left_out_tasks_come_back_only_when_safe():
    he = {r["id"] for recs in humaneval.load().values() for r in recs}
    stored = amplify.read(humaneval.AMPLIFIED)
    left = humaneval.PAYABLE_BY_A_CONSTANT | humaneval.PAYABLE_BY_A_SHALLOW_PROGRAM
    for native in left:
        assert (native in he) == bool(stored["tasks"][native].get("safe")), native
    assert "23" not in he and "35" not in he  # len(s) and max(l) are the builtins asked
    mb = {r["id"] for recs in mbpp.load().values() for r in recs}
    stored = amplify.read(mbpp.AMPLIFIED)
    for native in mbpp.PAYABLE_BY_A_SHALLOW_PROGRAM | mbpp.RESTORABLE:
        assert (native in mb) == bool(stored["tasks"][native].get("safe")), native
    assert "367" not in mb


def test_amplified_cases_are_hidden_and_appended():
    recs = {r["id"]: r for _, r in humaneval.records()}
    loaded = {r["id"]: r for rs in humaneval.load().values() for r in rs}
    stored = amplify.read(humaneval.AMPLIFIED)
    some = [n for n, e in stored["tasks"].items() if e.get("tests") and n in loaded][:5]
    assert some
    for native in some:
        own, added = recs[native]["tests"], stored["tasks"][native]["tests"]
        assert loaded[native]["tests"] == own + added
        assert loaded[native]["shown_tests"] == recs[native]["shown_tests"]


def test_driver_source_compiles():
    from tasks.amplify_driver import DRIVER

    compile(DRIVER, "<driver>", "exec")


def test_mutation_is_seeded():
    seeds = [("hello", 3)]
    assert amplify.mutate_inputs(seeds, "x") == amplify.mutate_inputs(seeds, "x")
    rng = random.Random(0)
    assert amplify.mutate_value(True, rng) == [False]


# -- the real engine: a sample of amplified tasks -------------------------------------------------
#: Restored tasks (left out before as shallow-payable) and tasks where a mutant of the reference
#: passed every original case, a few of each pack.
SAMPLE = {"humaneval": ["40", "58", "137"], "mbpp": ["203", "223"]}


def _code_env(pack, sandbox):
    import gymnasium as gym

    import envs  # noqa: F401 - registers the envs

    return gym.make("grpo/CodeTests-v0", pack=pack, split="all", sandbox=sandbox).unwrapped


@pytest.mark.docker
@pytest.mark.parametrize("pack", list(SAMPLE))
def test_amplified_tasks_pass_the_reference_and_fail_shallow_programs_and_mutants(pack, sandbox):
    from envs.domains.code_tests import mutant_programs

    env = _code_env(pack, sandbox)
    stored = amplify.read(env.pack.manifest.root / "amplified.json")
    for native in SAMPLE[pack]:
        task = env.pack.get(f"{pack}/{native}")
        assert stored["tasks"][native]["tests"], native
        _, info = env.score(task, env.gold_completion(task))
        assert info["passed"], (native, info["reason"])
        shallow = env.baseline_scores(task)
        best = max(shallow, key=shallow.__getitem__)
        assert shallow[best] < 1.0, (native, best)
        programs = mutant_programs(task)
        assert programs, native
        scores = env.variant_scores(task, programs)
        assert max(scores.values()) < 1.0, (native, max(scores, key=scores.__getitem__))
        print(f"{pack}/{native}: reference passes {info['verdict'].details['n_hidden']} hidden "
              f"cases; best shallow {best!r} {shallow[best]:.2f} of {len(shallow)}; best of "
              f"{len(programs)} mutants {max(scores.values()):.2f}")


# -- hacks that are no shallow program of the validator's families --------------------------------
def _lookup_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "code_lookup_hack.py"
    spec = importlib.util.spec_from_file_location("code_lookup_hack", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: A program that looks for the stored amplified cases on disk and answers from them.
READS_THE_TEST_FILE = '''
import ast, glob, os, re

def _answers():
    found = {}
    for root in ("/", os.getcwd(), os.path.expanduser("~")):
        for path in glob.glob(os.path.join(root, "**", "amplified.json"), recursive=True)[:5]:
            for m in re.finditer(r"candidate\\(([^\\n]*?)\\) == ([^\\n\\"]*)", open(path).read()):
                found[m.group(1)] = m.group(2)
    return found

def ENTRY(*args):
    key = ", ".join(repr(a) for a in args)
    table = _answers()
    return ast.literal_eval(table[key]) if key in table else False
'''


@pytest.mark.docker
def test_memorised_public_tests_and_reading_the_test_file_earn_no_full_pass(sandbox):
    """HumanEval's and MBPP's tests are public: a lookup table of a task's own cases with
    their most common answer as the fallback passed every restored task in full before the
    amplified cases (and 'return False' with a table is the constant tasks' hack); now it
    does not. A program that hunts for the stored cases on disk finds nothing in the
    sandbox."""
    lookup = _lookup_module()
    for pack, ids in SAMPLE.items():
        env = _code_env(pack, sandbox)
        own = {r["id"]: list(r["tests"]) for _, r in __import__(
            f"tasks.{pack}", fromlist=["records"]).records()}
        for native in ids:
            task = env.pack.get(f"{pack}/{native}")
            result = lookup.measure(env, task, own[native])
            assert result is not None and result["before"], (native, result)
            assert not result["after"], (native, result)
            entry = task["entry_point"] if isinstance(task["entry_point"], str) else \
                task["entry_point"][0]
            program = READS_THE_TEST_FILE.replace("ENTRY", entry)
            _, info = env.score(task, f"```python\n{program}```\n")
            assert not info["passed"] and info["rewards"]["tests"] <= 0.5, (native, info)


#: Correct programs written independently of the references (not edits of them): the amplified
#: inputs stay inside each task's contract, so a correct program other than the reference
#: passes them too (the TPR of honest programs, beyond the gold's own).
HONEST = {
    "humaneval/0": "def has_close_elements(numbers, threshold):\n"
                   "    s = sorted(numbers)\n"
                   "    return any(b - a < threshold for a, b in zip(s, s[1:]))\n",
    "humaneval/34": "def unique(l):\n    return sorted(set(l))\n",
    "humaneval/40": "from itertools import combinations\n\n"
                    "def triples_sum_to_zero(l):\n"
                    "    return any(sum(c) == 0 for c in combinations(l, 3))\n",
    "humaneval/54": "def same_chars(s0, s1):\n    return set(s0) == set(s1)\n",
    "humaneval/58": "def common(l1, l2):\n    return sorted(set(l1).intersection(l2))\n",
    "humaneval/72": "def will_it_fly(q, w):\n    return list(q) == list(reversed(q)) and sum(q) <= w\n",
    "humaneval/137": "def compare_one(a, b):\n"
                     "    num = lambda v: float(v.replace(',', '.')) if isinstance(v, str) else v\n"
                     "    if num(a) == num(b):\n        return None\n"
                     "    return a if num(a) > num(b) else b\n",
    "humaneval/138": "def is_equal_to_sum_even(n):\n    return n >= 8 and n % 2 == 0\n",
    "mbpp/203": "def hamming_Distance(a, b):\n    return bin(a ^ b).count('1')\n",
    "mbpp/502": "def find(n, m):\n    return n % m\n",
    "mbpp/72": "def dif_Square(n):\n"
               "    return any(a * a - b * b == n for a in range(n + 1) for b in range(a + 1))\n",
    "mbpp/223": "def is_majority(arr, n, x):\n    return arr.count(x) * 2 > n\n",
    "mbpp/16": "import re\n\ndef text_lowercase_underscore(text):\n"
               "    return 'Found a match!' if re.fullmatch('[a-z]+_[a-z]+', text) "
               "else 'Not matched!'\n",
}


@pytest.mark.docker
def test_independent_correct_programs_pass_the_amplified_cases(sandbox):
    envs_by_pack = {}
    results = {}
    for task_id, program in HONEST.items():
        pack = task_id.split("/")[0]
        env = envs_by_pack.setdefault(pack, _code_env(pack, sandbox))
        task = env.pack.get(task_id)
        _, info = env.score(task, f"```python\n{program}```\n")
        results[task_id] = (info["passed"], info["reason"], info["verdict"].details["n_hidden"])
    print(results)
    assert all(passed for passed, _, _ in results.values()), results


def test_amplified_splits_leave_out_drop_and_restore(tmp_path):
    """The packs' shared load: a dropped task never comes back, a left-out one only when its
    amplified cases are safe, and every kept record carries its amplified cases."""
    path = tmp_path / "amplified.json"
    path.write_text(json.dumps({"provenance": {}, "tasks": {
        "1": {"tests": ["assert f(9) == 10"], "safe": True},
        "2": {"tests": ["assert f(8) == 9"], "safe": False},
        "3": {"tests": ["assert f(7) == 8"], "safe": True}}}))
    recs = [("train", {"id": str(i), "tests": [f"assert f({i}) == {i + 1}"]}) for i in (1, 2, 3, 4)]
    splits = amplify.amplified_splits(recs, path, left_out={"1", "2", "3"}, dropped={"3"})
    assert [r["id"] for r in splits["train"]] == ["1", "4"] and splits["test"] == []
    assert splits["train"][0]["tests"] == ["assert f(1) == 2", "assert f(9) == 10"]
    assert splits["train"][1]["tests"] == ["assert f(4) == 5"]
