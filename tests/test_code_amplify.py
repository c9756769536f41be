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


def test_probe_inputs_leave_the_contract_and_repeat_no_known_input():
    # Seeds with a < b, both positive, a sorted list of distinct items: the contract's inputs
    # keep all of that; the probes keep only the kinds and sizes, off the contract first.
    seeds = [(1, 5, [1, 2, 3]), (2, 7, [4, 6, 9]), (3, 4, [0, 5, 8])]
    known = amplify.mutate_inputs(seeds, "t")
    probes = amplify.probe_inputs(seeds, "t", [*seeds, *known], pool=40)
    assert len(probes) == 40
    assert not {repr(p) for p in probes} & {repr(k) for k in [*seeds, *known]}
    contract = amplify.Invariants.of(seeds)
    assert not any(contract.allows(p) for p in probes[:20])  # off the contract first
    assert any(a > b for a, b, _ in probes) and any(a < 0 or b < 0 for a, b, _ in probes)
    assert any(xs != sorted(xs) for _, _, xs in probes)
    for a, b, xs in probes:  # but of the seeds' kinds
        assert isinstance(a, int) and isinstance(b, int)
        assert isinstance(xs, list) and all(isinstance(x, int) for x in xs)
    assert probes == amplify.probe_inputs(seeds, "t", [*seeds, *known], pool=40)  # seeded


def test_a_precondition_keeps_every_input_tried():
    """A hand-written precondition (``Precondition``): every mutant and probe keeps it, where
    the probes alone would leave it (mbpp/54's counting sort is of non-negative ints); one that
    raises on an input refuses it."""
    pre = amplify.Precondition("non-negative ints", holds=lambda xs: all(x >= 0 for x in xs))
    seeds = [([3, 1, 2],), ([5, 4, 9],)]
    made = amplify.mutate_inputs(seeds, "t", precondition=pre)
    probes = amplify.probe_inputs(seeds, "t", [*seeds, *made], precondition=pre)
    assert len(made) > 20 and len(probes) >= amplify.MIN_PROBES
    assert all(x >= 0 for (xs,) in [*made, *probes] for x in xs)
    assert any(0 in xs for (xs,) in probes)  # still off the seeds' contract (positive)
    free = amplify.probe_inputs(seeds, "t", [*seeds, *made])
    assert any(x < 0 for (xs,) in free for x in xs)
    assert pre.allows(([0, 2],)) and not pre.allows(([-1],)) and not pre.allows((["a"],))


def test_mbpp_preconditions_say_what_their_prompts_ask():
    from envs.tools.code_amplify import preconditions

    pre = preconditions("mbpp")
    assert set(pre) == {"54", "225"} and preconditions("humaneval") == {}
    rotated = pre["225"]
    for args in rotated.seeds:
        assert rotated.allows(args) and args[0] != sorted(args[0])
    assert rotated.allows(([1, 2, 3], 0, 2)) and rotated.allows(([2, 2, 1, 2], 0, 3))
    assert not rotated.allows(([3, 1, 2, 0], 0, 3))  # turned twice
    assert not rotated.allows(([3, 1, 2], 0, 1)) and not rotated.allows(([3, 1, 2], 1, 2))
    assert not rotated.allows(([], 0, -1)) and not rotated.allows((["b", "a"], 0, 1))
    counting = pre["54"]
    assert counting.allows(([0, 3, 3, 1],)) and not counting.allows(([2, -1],))
    assert not counting.allows(([True, 2],)) and not counting.allows(((1, 2),))


def test_probes_of_a_list_of_booleans_grow_longer_where_two_rounds_find_too_few():
    """mbpp/105 (count the Trues): the contract's inputs already hold the short lists of
    booleans two rounds of mutants make, so only 2 probes were new and ``sum`` (its answer)
    could not be called equivalent. Deeper rounds make longer lists."""
    seeds = [([True, False, True],), ([False, False],), ([True, True, True],)]
    known = amplify.mutate_inputs(seeds, "mbpp/105")
    probes = amplify.probe_inputs(seeds, "mbpp/105", [*seeds, *known])
    assert len(probes) >= amplify.MIN_PROBES
    assert not {repr(p) for p in probes} & {repr(k) for k in [*seeds, *known]}
    assert all(all(isinstance(v, bool) for v in xs) for (xs,) in probes)
    assert max(len(xs) for (xs,) in probes) > max(len(xs) for (xs,) in known)
    # Where two rounds give enough, the probes are those two rounds' (unchanged)
    seeds = [(1, 5, [1, 2, 3]), (2, 7, [4, 6, 9])]
    known = amplify.mutate_inputs(seeds, "t")
    two = [a for a in amplify.mutate_inputs(seeds, "t:probe", pool=4 * 40, contract=False)
           if a not in known and a not in seeds]
    assert set(map(repr, amplify.probe_inputs(seeds, "t", [*seeds, *known], pool=40))) <= set(
        map(repr, two))


def _adv(name, agrees, passes_own=2, shallow=True, memorised=False):
    return amplify.Adversary(name, shallow, passes_own, agrees, memorised=memorised)


def test_equivalent_shallow_needs_every_input_and_the_probes_answered():
    usable, probes = [0, 1, 2], list(range(3, 11))  # 8 probes: MIN_PROBES
    answers = ["[1, 2]", "[]", "[3]"] + ["[0]"] * 8
    sorted_ = _adv("the first argument sorted", "1" * 11)
    first = _adv("the first argument", "111" + "1101" + "1111")  # off on one probe
    timed_out = _adv("slow", "111" + "1111x111")
    fails_own = _adv("fails a case", "1" * 11, passes_own=1)
    table = _adv("a lookup", "1" * 11, memorised=True)
    mutant = _adv("mutant 0: < -> <=", "1" * 11, shallow=False)
    advs = [sorted_, first, timed_out, fails_own, table, mutant]
    assert amplify.equivalent_shallow(advs, 2, usable, probes, answers) == [sorted_.name]
    # Too few probes answered: nothing is called equivalent.
    assert amplify.equivalent_shallow(advs, 2, usable, probes[:7], answers) == []
    # A reference that gives one value on every input: a constant that matches it is the
    # inputs' weakness (mbpp/191's always-False month check), not an answer.
    const = _adv("the hidden answer False", "1" * 11)
    assert amplify.equivalent_shallow([const], 2, usable, probes, ["False"] * 11) == []


def test_the_contract_says_what_an_input_breaks():
    seeds = [(5, 9, [1, 2, 3], "ab"), (6, 11, [4, 6, 9], "ba")]
    contract = amplify.Invariants.of(seeds)
    assert contract.breaks((7, 12, [2, 5, 7], "aab")) == set()
    assert contract.breaks((-1, 12, [2, 5, 7], "ab")) == {"0:sign"}
    assert contract.breaks((7, 12, [7, 5, 5], "ab")) == {"2:sorted", "2:distinct"}
    assert contract.breaks((7, 12, [2, 5, 7], "a b")) == {"3:chars"}
    assert contract.breaks((13, 12, [2, 5, 7], "ab")) == {"lt:0:1"}
    assert contract.breaks((7, 12, [2, 5, 7])) == {"arity"}
    assert contract.breaks((7, "12", [2, 5, 7], "ab")) == {"1:kind"}
    assert not contract.allows((-1, 12, [2, 5, 7], "ab"))


def test_choose_probes_leaves_the_contract_each_way_then_again():
    broken = {10: {"0:sign"}, 11: {"0:sign", "2:distinct"}, 12: {"3:chars"}, 13: set(),
              14: {"2:distinct"}, 15: {"0:sign"}}
    # The probe breaking the most first, then the way not broken yet; a new round then.
    assert amplify.choose_probes(broken, n=2) == [11, 12]
    assert amplify.choose_probes(broken, n=4) == [11, 12, 15, 14]
    assert amplify.choose_probes(broken, n=9) == [11, 12, 15, 14, 10]  # 13 breaks nothing
    assert amplify.choose_probes({1: set()}, n=4) == []


def test_select_cases_takes_the_first_ones_beyond_its_budget():
    # Nothing to kill: only the inputs given first, kept in front.
    quiet = [_adv("mutant 0: x", "0000", shallow=False)]
    assert amplify.select_cases(quiet, 2, [0, 1, 2, 3], max_added=0, first=[3]) == [3]


def test_near_misses_of_a_builtin_answer():
    from envs.tools.code_amplify import NEAR_MISS_SUFFIX, _near_misses
    from tasks import Task

    task = Task("mbpp/900", "test", {"tests": ["assert f([3, 1]) == [1, 3]"], "entry_point": ["f"]})
    near = _near_misses(task, ["the first argument sorted"], ([3, 1],))
    assert all(name.endswith(NEAR_MISS_SUFFIX) for name in near)
    assert set(near.values()) >= {
        "return sorted(args[0], key=abs)", "return sorted(args[0], key=str)",
        "a = list(args)\n    x = a[0]\n    a[0] = type(x)(dict.fromkeys(x))\n"
        "    return sorted(a[0])"}
    namespace: dict = {}
    bodies = list(near.values())
    exec("".join(f"def f{i}(*args):\n    {b}\n" for i, b in enumerate(bodies)), namespace)
    outs = [tuple(namespace[f"f{i}"]([3, -5, 3, 10, 9])) for i in range(len(bodies))]
    assert (-5, 3, 3, 9, 10) not in outs  # each is wrong on an input the contract may lack
    # A string argument gets the string changes; a fallback name has none of its own.
    words = _near_misses(task, ["the first argument's length", "the first argument sorted, "
                                "else None"], ("ab c",))
    assert {n.split(", its argument ")[1].removesuffix(NEAR_MISS_SUFFIX) for n in words} == {
        "stripped", "without spaces", "lower-cased", "less its first character",
        "less its last character", "its ends only"}


def test_select_cases_kills_full_passers_then_halves_the_shallow():
    own = 2  # graded cases of the task itself
    a = amplify.Adversary("const", True, 2, "1100")   # passes both own cases
    b = amplify.Adversary("mutant", False, 2, "1011")  # passes both own cases
    c = amplify.Adversary("dead", False, 1, "0000")    # already fails one own case
    chosen = amplify.select_cases([a, b, c], own, [0, 1, 2, 3], max_added=4)
    # Both a and b pass everything: inputs 1, 2 and 3 each fail one of them and all fail c;
    # of those, 2 also fails the shallow a (over half: with no case added, a table of the own
    # cases passes in full), so it goes first; then 1 fails b. a passes 1 of the 2 added
    # cases: at half, and 4 graded cases: done.
    assert chosen == [2, 1]
    # without room, only the first (b still passes everything)
    assert amplify.select_cases([a, b, c], own, [0, 1, 2, 3], max_added=1) == [2]
    # the half rule may add HALF_RULE_EXTRA cases past max_added: a passes input 1
    f = amplify.Adversary("const", True, 1, "1110")  # fails an own case
    assert amplify.select_cases([f, b], own, [0, 1, 2, 3], max_added=1,
                                half_rule_extra=0) == [1]
    assert amplify.select_cases([f, b], own, [0, 1, 2, 3], max_added=1) == [1, 3]
    # a shallow program that passes in full gets a case it fails (1); at MIN_GRADED (4)
    # graded cases with 2 added, it passes 0 of them
    d = amplify.Adversary("shallow", True, 2, "1000")
    assert amplify.select_cases([d], own, [0, 1, 2, 3], max_added=4) == [1, 2]
    # one that fails an own case still gets an added case it fails: the own cases are
    # public, and behind a table of them it would pass them all
    e = amplify.Adversary("half", True, 1, "1000")
    assert amplify.select_cases([e], own, [0, 1, 2, 3], max_added=4, min_graded=2) == [1]
    assert amplify.memorised_share(e, [1]) == 0.0 and amplify.memorised_share(e, []) == 1.0


def test_a_near_miss_is_held_to_the_half_rule_where_the_inputs_allow():
    # The probe cases 1 and 2 come first, and the near miss passes both: over half. It is
    # no shallow program, but it is halved as one (``halve``): 0, then 3.
    near = amplify.Adversary("min(x[1:])", False, 2, "01100", halve=True)
    assert amplify.select_cases([near], 2, range(5), max_added=0, first=[1, 2]) == [1, 2, 0, 3]
    plain = amplify.Adversary("min(x[1:])", False, 2, "01100")
    assert amplify.select_cases([plain], 2, range(5), max_added=0, first=[1, 2]) == [1, 2]


def test_the_half_rule_goes_first_for_the_program_furthest_over():
    """X passes all 6 cases chosen (3 over half), Y and Z 4 each (1 over): the input that
    fails X comes before the one that fails both Y and Z. Counting the programs failed picked
    the other: on mbpp/225 the cases that failed the many programs right where the minimum is
    last won every round, and min(x[1:]) kept 14 of 16."""
    x = amplify.Adversary("X", True, 2, "111111" + "01")
    y = amplify.Adversary("Y", True, 2, "111100" + "10")
    z = amplify.Adversary("Z", True, 2, "110011" + "10")
    chosen = amplify.select_cases([x, y, z], 2, range(8), max_added=0, half_rule_extra=1,
                                  first=range(6))
    assert chosen == [0, 1, 2, 3, 4, 5, 6]


def test_select_cases_checks_the_half_rule_last():
    """The cases added to reach MIN_GRADED are those most adversaries fail, which a shallow
    program may pass: mbpp had 25 tasks whose best shallow program passed over half of the
    graded cases because this step ran after the half rule. Now the half rule runs last."""
    # True/False answers: inputs 0-2 answer True, 3-4 False; the mutants fail them all.
    true = amplify.Adversary("True", True, 1, "11100")
    false = amplify.Adversary("False", True, 1, "00011")
    muts = [amplify.Adversary(f"m{k}", False, 1, "00000") for k in range(3)]
    chosen = amplify.select_cases([true, false, *muts], 1, range(5), max_added=6,
                                  min_graded=4)
    # 0 fails False, 3 fails True; the third graded case (1, which most fail) leaves True at
    # 2 of 3 added cases, and the half rule then adds 4
    assert chosen == [0, 3, 1, 4]
    shares = {a.name: amplify.memorised_share(a, chosen) for a in (true, false)}
    assert max(shares.values()) <= amplify.SHALLOW_MAX, (chosen, shares)


def test_a_timeout_is_no_failure():
    """A mutant as fast as the reference timed out on a loaded machine; taken for a failure,
    an equivalent mutant looked separable, was stored, and validate found it passing every
    case (humaneval/147, mbpp/386, 397). A timeout ("x") may pass, as "t" does."""
    slow = amplify.Adversary("mutant", False, 2, "x1x1")
    assert amplify.select_cases([slow], 2, range(4), max_added=4, min_graded=2) == []
    assert amplify.memorised_share(slow, [0, 1]) == 1.0
    # a value that differs is a failure
    wrong = amplify.Adversary("mutant", False, 2, "x10x")
    assert amplify.select_cases([wrong], 2, range(4), max_added=4, min_graded=2) == [2]


def test_every_answer_of_the_reference_is_a_hidden_answer_constant():
    """The code env tries the most common hidden answers as constants, and the added cases
    are hidden: mbpp/37 (its own cases all shown) had one added case, which returning its
    answer passed in full."""
    from envs.tools.code_amplify import _hidden_answer_constants

    tests = ["assert f(1) == [1]", "assert f(2) == [2, 1]"]
    canon = [["ok", "[1]", 0.0], ["ok", "[2, 1]", 0.0], ["ok", "[1]", 0.0], ["error", None, 0.0]]
    found = {a.name: a for a in _hidden_answer_constants(tests, [1], {"f"}, canon, [0, 1, 2])}
    assert set(found) == {"the hidden answer [1]", "the hidden answer [2, 1]"}
    one, two = found["the hidden answer [1]"], found["the hidden answer [2, 1]"]
    assert (one.agrees, one.passes_own, one.shallow) == ("101-", 0, True)
    assert (two.agrees, two.passes_own) == ("010-", 1)
    # with no own case graded, each constant fails an added case, and neither passes over half
    chosen = amplify.select_cases([one, two], 0, [0, 1, 2], max_added=4, min_graded=2)
    assert all(amplify.memorised_share(a, chosen) <= amplify.SHALLOW_MAX for a in (one, two))


def test_lookup_adversaries_answer_as_the_nearest_public_input():
    cases = ["assert candidate(10, 'abc') == True", "assert candidate(50, 'xyz') == False",
             "assert abs(candidate(1.5, 'a') - 2.0) < 1e-6", "assert f(3, 'q') == True"]
    table = amplify.case_table(cases, {"candidate"})
    assert table == {"(10, 'abc')": True, "(50, 'xyz')": False}
    near = amplify.nearest_answers(table, (12, "abd"))
    assert near == {"the nearest public input's answer (text)": True,
                    "the nearest public input's answer (numbers)": True}
    assert amplify.nearest_answers(table, (45, "zzz"))[
        "the nearest public input's answer (numbers)"] is False
    assert amplify.same_value(2.0000001, 2.0) and not amplify.same_value(True, 2.0)
    assert amplify.same_value({"a": 1}, {"a": 1}) and not amplify.same_value([1], (1,))


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
    # Tasks re-made since the whole run (``--only``) are listed with their command and date;
    # the whole run's provenance stays.
    for remade in prov.get("remade", []):
        assert remade["generator"].split()[-len(remade["only"]):] == remade["only"]
        assert set(remade["only"]) <= set(stored["tasks"]) and remade["made"] > prov["made"]


#: Packs whose stored file was made by the generator that takes lookup programs as
#: adversaries (mbpp joins when ``python -m envs.tools.code_amplify --packs mbpp`` re-makes its file).
MEMORISED_CHECKED = [humaneval, mbpp]


@pytest.mark.parametrize("module", MEMORISED_CHECKED, ids=lambda m: m.__name__.split(".")[-1])
def test_no_task_is_half_paid_by_its_memorised_public_cases(module):
    """Every HumanEval and MBPP task's own cases are public; with them as a lookup table and
    any shallow program behind it, a program passed 143 HumanEval and 483 MBPP tasks in full
    before the amplified cases, and over half of 125 and 85 with the first amplified files
    (``benchmarks/code_lookup_hack.py``). The reward is now at most the share of the
    unpublished cases passed, and in every task left in the pack each shallow program
    passes at most half of those; a task where no inputs allow it leaves, with its reason."""
    stored = amplify.read(module.AMPLIFIED)
    loaded = {r["id"]: r for recs in module.load().values() for r in recs}
    kept = getattr(module, "KEPT_OVER_HALF", set())
    for native, rec in loaded.items():
        entry = stored["tasks"].get(native) or {}
        if "skipped" in entry or not entry:
            continue
        if native not in kept:
            assert entry["after"]["memorised_best"] <= amplify.SHALLOW_MAX, native
        assert entry["after"]["memorised_best"] < 1.0, native
        assert rec["unpublished_tests"] == entry["tests"], native
    assert stored["summary"]["left_out"], "the summary lists the tasks that leave"
    for native in stored["summary"]["left_out"]:
        assert (native in loaded) == (native in kept)
        assert amplify.left_out_reason(stored, native), native


def test_left_out_tasks_come_back_only_when_safe():
    he = {r["id"] for recs in humaneval.load().values() for r in recs}
    stored = amplify.read(humaneval.AMPLIFIED)
    left = humaneval.PAYABLE_BY_A_CONSTANT | humaneval.PAYABLE_BY_A_SHALLOW_PROGRAM
    for native in left:
        assert (native in he) == bool(stored["tasks"][native].get("safe")), native
    # len(s) and max(l) are the builtins asked: the answer by another route, so they are back
    # (tasks.amplify.equivalent_shallow), and the env no longer tries them as shallow programs.
    assert {"23", "35"} <= he
    assert stored["tasks"]["23"]["equivalent_shallow"][0] == "the first argument's length"
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


@pytest.mark.docker
def test_a_builtin_that_is_the_answer_is_no_adversary_but_one_the_inputs_favour_is(sandbox):
    """mbpp/141 (pancake sort): ``sorted`` returns the reference's value on every input, off the
    contract too, so it is the answer by another route and the task comes back; mbpp/404
    (minimum of a and b): every seed has a <= b, so ``return a`` matches the contract's inputs
    but not the probes where a > b: still an adversary, and the task stays out."""
    from envs.tools import code_amplify

    recs = {r["id"]: (s, r) for s, r in mbpp.records() if r["id"] in ("141", "404")}
    pancake = code_amplify.amplify_record(sandbox, "mbpp", *recs["141"])
    minimum = code_amplify.amplify_record(sandbox, "mbpp", *recs["404"])
    print({k: (e.get("probes"), e.get("equivalent_shallow", [])[:2], e.get("left_out"))
           for k, e in (("141", pancake), ("404", minimum))})
    assert pancake["probes"] >= amplify.MIN_PROBES
    assert "the first argument sorted" in pancake["equivalent_shallow"]
    assert pancake["safe"] and "left_out" not in pancake
    assert minimum["probes"] >= amplify.MIN_PROBES
    assert "the first argument" not in minimum["equivalent_shallow"]
    assert not minimum["safe"] and "the first argument" in minimum["left_out"]


#: Wrong programs tried against the restored tasks whose answer is a builtin (found while
#: attacking them: before the near misses and the probe cases, the first five passed mbpp/71,
#: 141, 152 or 428 in full, the sixth humaneval/23, the last two mbpp/62), each as a body
#: over ``args``: none may pass any of these tasks in full.
WRONG_BUILTIN_ANSWERS = {
    "sorted_set": "return sorted(set(args[0]))",
    "sorted_key_abs": "return sorted(args[0], key=abs)",
    "sorted_abs": "return sorted(map(abs, args[0]))",
    "sorted_key_str": "return sorted(args[0], key=str)",
    "sorted_desc": "return sorted(args[0], reverse=True)",
    "len_strip": "return len(str(args[0]).strip())",
    "min_key_abs": "return min(args[0], key=abs)",
    "min_tail": "return min(args[0][1:])",
    "len_set": "return len(set(args[0]))",
    "len_minus_1": "return len(args[0]) - 1",
    "max_but_last": "return max(args[0][:-1])",
}
BUILTIN_ANSWER_TASKS = {"humaneval": ["23", "35"],
                        "mbpp": ["62", "71", "141", "152", "242", "372", "428", "443"]}


@pytest.mark.docker
@pytest.mark.parametrize("pack", list(BUILTIN_ANSWER_TASKS))
def test_no_near_miss_of_a_builtin_answer_passes_in_full(pack, sandbox):
    env = _code_env(pack, sandbox)
    paid = {}
    for native in BUILTIN_ANSWER_TASKS[pack]:
        task = env.pack.get(f"{pack}/{native}")
        assert task["equivalent_baselines"], native
        scores = env.shallow_scores(task, WRONG_BUILTIN_ANSWERS)
        paid |= {(native, name): s for name, s in scores.items() if s == 1.0}
    assert paid == {}


@pytest.mark.docker
def test_a_restored_task_pays_its_builtin_answer_and_no_shallow_program(sandbox):
    """The restored sorting task pays ``sorted`` (an honest answer) in full, no longer tries it
    as a shallow program, and the shallow programs it does try earn at most half."""
    from envs.domains.code_tests import task_baselines

    env = _code_env("mbpp", sandbox)
    task = env.pack.get("mbpp/141")
    assert "the first argument sorted" in task["equivalent_baselines"]
    assert "the first argument sorted" not in task_baselines(task)
    assert "the first argument reversed" in task_baselines(task)
    _, info = env.score(task, "```python\ndef pancake_sort(nums):\n    return sorted(nums)\n```\n")
    assert info["passed"], info["reason"]
    _, info = env.score(task, "```python\ndef pancake_sort(nums):\n    return nums\n```\n")
    assert not info["passed"]
    assert env.trivially_passed([task]) == {} and env.mutants_passed([task]) == {}
    assert max(env.baseline_scores(task).values()) <= amplify.SHALLOW_MAX


#: Wrong programs written against the tasks back under a precondition or deeper probes (each a
#: body over ``args``), and the honest answer of each.
WRONG_ON_RESTORED = {
    "54": {"sorted_set": "return sorted(set(args[0]))", "key_str": "return sorted(args[0], key=str)",
           "descending": "return sorted(args[0], reverse=True)", "as_given": "return args[0]",
           "zeros_dropped": "return sorted(v for v in args[0] if v)"},
    "105": {"length": "return len(args[0])", "any": "return int(any(args[0]))",
            "tail": "return sum(args[0][1:])", "head": "return sum(args[0][:-1])",
            "falses": "return args[0].count(False)", "ends": "return sum(args[0][:1] + args[0][-1:])"},
    "225": {"first": "return args[0][0]", "last": "return args[0][-1]",
            "middle": "return args[0][len(args[0]) // 2]",
            "ends": "return min(args[0][0], args[0][-1])",
            "tail": "return min(args[0][1:]) if len(args[0]) > 1 else args[0][0]",
            "second_smallest": "return sorted(args[0])[1] if len(args[0]) > 1 else args[0][0]"},
}
HONEST_ON_RESTORED = {"54": "def counting_sort(my_list):\n    return sorted(my_list)\n",
                      "105": "def count(lst):\n    return sum(lst)\n",
                      "225": "def find_Min(arr, low, high):\n    return min(arr[low:high + 1])\n"}


@pytest.mark.docker
def test_tasks_back_under_a_precondition_pay_the_answer_and_no_wrong_program(sandbox):
    """mbpp/54 and 225 (a hand-written precondition) and mbpp/105 (deeper probes) are back:
    their answer by a builtin passes, no wrong program written against them does, and the
    first item (the shallow program that kept mbpp/225 out) earns under half."""
    env = _code_env("mbpp", sandbox)
    for native, wrong in WRONG_ON_RESTORED.items():
        task = env.pack.get(f"mbpp/{native}")
        assert task["equivalent_baselines"], native
        _, info = env.score(task, f"```python\n{HONEST_ON_RESTORED[native]}```\n")
        assert info["passed"], (native, info["reason"])
        scores = env.shallow_scores(task, wrong)
        print(native, {k: round(v, 2) for k, v in scores.items()})
        assert max(scores.values()) < 1.0, (native, scores)
    first = env.shallow_scores(env.pack.get("mbpp/225"), {"first": "return args[0][0]"})
    assert first["first"] <= amplify.SHALLOW_MAX


#: Tasks that ``python -m envs validate`` refused with the stored file of a loaded run: a
#: mutant that differs only by a timeout in the generator (humaneval/147, mbpp/386, 397) or
#: the hidden answer as a constant (mbpp/37).
REFUSED = {"humaneval": ["147"], "mbpp": ["37", "386", "397"]}


@pytest.mark.docker
@pytest.mark.parametrize("pack", list(REFUSED))
def test_validate_finds_no_full_passer_on_the_tasks_it_refused(pack, sandbox):
    env = _code_env(pack, sandbox)
    tasks = [env.pack.get(f"{pack}/{native}") for native in REFUSED[pack]]
    assert env.trivially_passed(tasks) == {}
    assert env.mutants_passed(tasks) == {}
    for task in tasks:
        _, info = env.score(task, env.gold_completion(task))
        assert info["passed"], (task.id, info["reason"])


# -- hacks that are no shallow program of the validator's families --------------------------------
def _lookup_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "code_lookup_hack.py"
    spec = importlib.util.spec_from_file_location("code_lookup_hack", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: A program that looks for the stored amplified cases on disk and answers from them. It walks
#: the whole file system (hidden folders too) but the kernel's /proc, /sys and /dev, which hold
#: no stored file and never end (a recursive glob of / used up the first case's 3 s, so the
#: search was never finished); the table is read once, at the first call.
READS_THE_TEST_FILE = '''
import ast, os, re

_TABLE = None

def _answers():
    found = {}
    for root, dirs, files in os.walk("/"):
        if root == "/":
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        if "amplified.json" in files:
            text = open(os.path.join(root, "amplified.json")).read()
            for m in re.finditer(r"candidate\\(([^\\n]*?)\\) == ([^\\n\\"]*)", text):
                found[m.group(1)] = m.group(2)
    return found

def ENTRY(*args):
    global _TABLE
    if _TABLE is None:
        _TABLE = _answers()
    key = ", ".join(repr(a) for a in args)
    return ast.literal_eval(_TABLE[key]) if key in _TABLE else False
'''


@pytest.mark.docker
def test_memorised_public_tests_and_reading_the_test_file_earn_at_most_half(sandbox):
    """HumanEval's and MBPP's tests are public: a lookup table of a task's own cases with
    their most common answer as the fallback passed every restored task in full before the
    amplified cases (and 'return False' with a table is the constant tasks' hack); now it
    earns at most half, and so do the variants tried against the fix (``FALLBACKS``: the
    nearest known input's answer, which passed 7 HumanEval tasks in full before the nearest
    lookup became an adversary of the amplifier, the answer type's default, the argument
    echoed or sorted). A program that hunts for the stored cases on disk finds nothing in
    the sandbox."""
    lookup = _lookup_module()
    # The hunt works: a stored file the sandbox can see is found and answered from.
    planted = sandbox.run(READS_THE_TEST_FILE.replace("ENTRY", "f") + "print(f(1, 2), f(3))\n",
                          files={"amplified.json": '{"t": ["assert candidate(1, 2) == 42"]}'})
    assert planted.stdout == "42 False\n", (planted.status, planted.stderr[-500:])
    for pack, ids in SAMPLE.items():
        env = _code_env(pack, sandbox)
        own = {r["id"]: list(r["tests"]) for _, r in __import__(
            f"tasks.{pack}", fromlist=["records"]).records()}
        for native in ids:
            task = env.pack.get(f"{pack}/{native}")
            for fallback in lookup.FALLBACKS:
                result = lookup.measure(env, task, own[native], fallback)
                assert result is not None, (native, fallback)
                if fallback == "common":
                    assert result["before"], (native, result)
                assert not result["after"], (native, fallback, result)
                assert result["after_share"] <= amplify.SHALLOW_MAX, (native, fallback, result)
            entry = task["entry_point"] if isinstance(task["entry_point"], str) else \
                task["entry_point"][0]
            program = READS_THE_TEST_FILE.replace("ENTRY", entry)
            _, info = env.score(task, f"```python\n{program}```\n")
            assert not info["passed"] and info["rewards"]["tests"] <= 0.5, (native, info)
            # The search ended and every case was answered from what it found.
            assert info["reason"] == "failed_tests", (native, info["reason"])


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
