"""The amplified HumanEval and MBPP hidden tests (issue 43, section 3): the input mutation keeps
the contract the seeds show, the case choice is the greedy one documented, the stored files
have their provenance, the left-out tasks are back only when safe, and (Docker, the real
engine) on a sample of amplified tasks the reference passes every case while the shallow
programs and the reference's mutants do not."""

from __future__ import annotations

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
    # at half already: nothing is added
    e = amplify.Adversary("half", True, 1, "1000")
    assert amplify.select_cases([e], own, [0, 1, 2, 3], max_added=4) == []


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
    assert prov["generator"].startswith("python -m envs.code_amplify")
    assert len(prov["source"]["sha256"]) == 64
    ids = {rec["id"] for _, rec in module.records()}
    assert set(stored["tasks"]) <= ids
    assert stored["summary"]["cases_added"] == sum(
        len(e.get("tests", [])) for e in stored["tasks"].values())
    after = stored["summary"]["after"]
    assert after["tasks_a_mutant_passes"] <= stored["summary"]["before"]["tasks_a_mutant_passes"]


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
