"""The card's reference for reasoning-gym tasks with several right answers
(``envs.domains.reasoning_gym.answer_validity``): another valid answer is right, not a hack the reward
search reports; a wrong one is still wrong, so the card reports it when the env pays it."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.domains.reasoning_gym import grading
from envs.domains.reasoning_gym.answer_validity import is_right, makes_target
from envs.tools.card import reference, search
from envs.tools.card.grading import Graded


def _board(columns: list[int]) -> str:
    n = len(columns)
    return "\n".join(" ".join("Q" if j == c else "_" for j in range(n)) for c in columns)


# One queen given (row 7, column 1): eight placements keep it (brute force), two of them here.
_PUZZLE = [["_"] * 8 for _ in range(7)] + [["_", "Q", "_", "_", "_", "_", "_", "_"]]
QUEENS = {"metadata": {"puzzle": _PUZZLE}}
GOLD_BOARD = [4, 2, 7, 3, 6, 0, 5, 1]
OTHER_BOARD = [2, 5, 3, 0, 7, 4, 6, 1]  # columns of the placement the search found paid


@pytest.mark.parametrize("columns", [GOLD_BOARD, OTHER_BOARD])
def test_any_valid_placement_keeping_the_given_queens_is_right(columns):
    assert is_right("n_queens", _board(columns), QUEENS) is True
    assert is_right("n_queens", _board(columns).replace("\n", " \n") + "\n", QUEENS) is True


@pytest.mark.parametrize("answer, why", [
    (_board([2, 5, 3, 0, 7, 4, 1, 6]), "two queens on one diagonal, the given queen moved"),
    (_board([0, 1, 2, 3, 4, 5, 6, 7]), "every queen on one diagonal"),
    (_board([2, 5, 3, 0, 7, 4, 6, 1]).replace("Q", "_", 1), "seven queens"),
    ("\n".join(_board(OTHER_BOARD).splitlines()[:7]), "seven rows"),
    (_board(OTHER_BOARD).replace("_", "."), "another blank cell"),
    (_board(OTHER_BOARD).replace("\n", " "), "one line"),
    ("[[0, 1]]", "a list, not a board"),
    ("", "empty"),
])
def test_a_wrong_board_is_wrong(answer, why):
    assert is_right("n_queens", answer, QUEENS) is False, why


def test_a_valid_board_that_drops_a_given_queen_is_wrong():
    # A valid 8-queens placement, but not the puzzle's: its row 7 queen is elsewhere.
    assert is_right("n_queens", _board([0, 4, 7, 5, 2, 6, 1, 3]), QUEENS) is False


COUNTDOWN = {"metadata": {"numbers": [6, 18, 76, 6, 48], "target": 214}}
PUZZLE24 = {"metadata": {"numbers": [7, 4, 3, 10]}}


@pytest.mark.parametrize("task, entry, answer", [
    ("countdown", COUNTDOWN, "18*48/6 - 6 + 76"),  # the gold
    ("countdown", COUNTDOWN, "76 + 48*18/6 - 6"),
    ("countdown", COUNTDOWN, "(48/6)*18 + 76 - 6"),
    ("countdown", COUNTDOWN, "-6 + 76 + 18*(48/6)"),
    ("puzzle24", PUZZLE24, "7 + 4 + 3 + 10"),  # the gold
    ("puzzle24", PUZZLE24, "10 + 7 + 3 + 4"),
    ("puzzle24", PUZZLE24, "(10 - 7 + 3) * 4"),
])
def test_another_expression_that_makes_the_target_is_right(task, entry, answer):
    assert is_right(task, answer, entry) is True


@pytest.mark.parametrize("task, entry, answer, why", [
    ("puzzle24", PUZZLE24, "(10*7 + 4)/3", "74/3: puzzle24's scorer truncates it to 24"),
    ("puzzle24", PUZZLE24, "7 + 4 + 3 + 10 + 0", "a number not given"),
    ("puzzle24", PUZZLE24, "7 + 7 + 10", "a number twice, one missing"),
    ("puzzle24", PUZZLE24, "(7 + 4 + 3 + 10)**1", "a power"),
    ("puzzle24", PUZZLE24, "7.0 + 4 + 3 + 10", "a decimal"),
    ("puzzle24", PUZZLE24, "7 + 4 + 3 + 10 = 24", "an equation"),
    ("puzzle24", PUZZLE24, "__import__('os').system('true') or 24", "code"),
    ("puzzle24", PUZZLE24, "7 + 4 + 3 + 10/(4-4)", "division by zero"),
    ("countdown", COUNTDOWN, "18*48/6 - 6 + 76 + 1/1000000000", "a little off the target"),
    ("countdown", COUNTDOWN, "18*48/6 + 76", "a number left out"),
    ("countdown", COUNTDOWN, "18*48//6 - 6 + 76", "floor division"),
    ("countdown", COUNTDOWN, "(" * 400 + "6" + ")" * 400, "nested too deeply to read"),
])
def test_a_wrong_expression_is_wrong(task, entry, answer, why):
    assert is_right(task, answer, entry) is False, why


def test_the_check_reads_exact_fractions_not_floats():
    assert 1 / 49 * 49 != 1  # in floats
    assert makes_target("1/49*49", [1, 49, 49], 1)


def test_a_task_without_a_check_says_so():
    assert is_right("chain_sum", "5", {"metadata": {}}) is None


@pytest.fixture(scope="module")
def queens_env():
    pytest.importorskip("reasoning_gym")
    env = gym.make("grpo/ReasoningGym-v0", task="n_queens", split="test").unwrapped
    yield env
    env.close()


def _paying(pairs):
    return [Graded(1.0, 1.0, 1.0, True, False, None, 0.0) for _ in pairs]


def test_the_search_counts_another_placement_right_and_reports_a_paid_wrong_board(queens_env):
    env = queens_env
    task = env.pack.task_at("test", 0)
    gold = task["answer"]
    others = [b for b in task["rg_entry"]["metadata"]["valid_answers"] if b != gold]
    assert others, "the task has one right answer only"
    other = env.answer_in_format(others[0])
    assert env.score(task, other)[1]["passed"] is True  # the env pays it: it is right
    assert reference.correct(env, task, other)
    assert reference.correct(env, task, env.gold_completion(task))
    rows = gold.splitlines()
    wrong = env.answer_in_format("\n".join(rows[1:] + rows[:1]))  # rows rotated: queens moved
    assert not reference.correct(env, task, wrong)
    result = search.SearchResult()
    pool = search._Pool(task, env.pack.prompt(task))
    search._grade(env, [(pool, other), (pool, wrong)], _paying, result)  # as if both were paid
    assert result.correct == 1
    assert [f.completion for f in result.paid_wrong] == [wrong]


def test_puzzle24_pays_nothing_for_other_numbers_or_a_value_truncated_to_24():
    # The card's other_task_gold canary: reasoning-gym's scorer only checks that four numbers
    # in its range are written, so another task's gold was paid (the answer grammar now
    # requires the question's numbers, each once); and it truncates the value with int(), so
    # 74/3 was paid (the grammar now requires exactly 24). Graded as the env grades (its scorer in
    # the worker); a hand entry, since drawing puzzle24 tasks takes tens of seconds.
    pytest.importorskip("reasoning_gym")
    spec = ("rg", "puzzle24", grading.config_key({}))
    for answer in ("6*4*1*1", "8 + 8 + 4 + 4", "7 + 4 + 3",  # 24, not from these numbers
                   "(10*7 + 4)/3", "7*4 - 10/3"):  # both 74/3: the scorer truncates (were paid)
        assert not is_right("puzzle24", answer, PUZZLE24)
        verdict = grading.grade_scorer(spec, PUZZLE24, f"<answer>{answer}</answer>", 30.0)
        assert not verdict.passed and verdict.reason == "not_in_grammar", answer
    for answer in ("7 + 4 + 3 + 10", "(10 - 7 + 3) * 4", "10+7+3+4"):
        verdict = grading.grade_scorer(spec, PUZZLE24, f"<answer>{answer}</answer>", 30.0)
        assert verdict.passed, (answer, verdict)



# jugs: capacities A:12, B:13, C:6, target 3 (rg-jugs/test-L0-8's puzzle): any plan that leaves
# a jug at the target is right, not only the gold's (the search had called the gold's plan with
# a spaced move a paid wrong answer; a move's spelling is the answer form's business).
JUGS = {"metadata": {"puzzle": {"jug_capacities": [12, 13, 6], "target": 3}}}
# Traced by hand (A, B, C): fill B (0,13,0), pour B->A (12,1,0), empty A, pour B->A (1,0,0),
# fill B, pour B->A (12,2,0), empty A, pour B->A (2,0,0), fill B, pour B->A (12,3,0): B holds 3.
JUGS_GOLD = ('["fill B", "pour B->A", "empty A", "pour B->A", "fill B", "pour B->A", "empty A", '
             '"pour B->A", "fill B", "pour B->A"]')


@pytest.mark.parametrize(("answer", "right"), [
    (JUGS_GOLD, True),
    (JUGS_GOLD[:-1] + ', "fill C", "empty C"]', True),  # another plan: B still at 3
    ('["fill B", "pour B->A"]', False),  # (12, 1, 0)
    (JUGS_GOLD[:-1] + ', "empty B"]', False),  # the 3 poured away
    (JUGS_GOLD.replace('"pour B->A"]', '"pour B->A "]'), False),  # not the question's spelling
    ('["fill D"]', False), ('{"fill": "A"}', False), ("fill A", False),
])
def test_a_jugs_plan_is_right_when_a_jug_ends_at_the_target(answer, right):
    assert is_right("jugs", answer, JUGS) is right


# quantum_lock: start 0 (red), target 8; A: subtract 1, B: multiply 2, C: add 2 (when any);
# shortest 3 presses (rg-quantum_lock/test-L0-21, gold C → B → B). Traced by hand.
LOCK = {"metadata": {"initial_value": 0, "initial_state": "red", "target_value": 8,
                     "solution_path": ["C", "B", "B"], "buttons": [
                         {"name": "A", "type": "subtract", "value": 1, "active_state": "any"},
                         {"name": "B", "type": "multiply", "value": 2, "active_state": "any"},
                         {"name": "C", "type": "add", "value": 2, "active_state": "any"}]}}
# start 0 (red), target 5, shortest 2: C (add 2, any) then A (add 3, only while green)
GREEN = {"metadata": {"initial_value": 0, "initial_state": "red", "target_value": 5,
                      "solution_path": ["C", "A"], "buttons": [
                          {"name": "A", "type": "add", "value": 3, "active_state": "green"},
                          {"name": "C", "type": "add", "value": 2, "active_state": "any"}]}}


@pytest.mark.parametrize(("entry", "answer", "right"), [
    (LOCK, "C → B → B", True), (LOCK, "C → B→ B", True), (LOCK, "C->B->B", True),  # 2, 4, 8
    (LOCK, "C → C → B", True),  # 2, 4, 8: another shortest sequence
    (LOCK, "B → C → B", False),  # 0, 2, 4
    (LOCK, "C → C → C → C", False),  # 8, but not the shortest
    (LOCK, "C → D → B → B", False),  # no button D
    (GREEN, "C → A", True),  # 2 (light green), 5
    (GREEN, "A → C", False),  # A pressed while red
])
def test_a_quantum_lock_sequence_is_right_when_shortest_and_it_reaches_the_target(entry, answer,
                                                                                  right):
    assert is_right("quantum_lock", answer, entry) is right
