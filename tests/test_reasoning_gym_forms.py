"""Each reasoning-gym scorer that reads its answer as data gets only an answer of its task's form
(``envs.domains.reasoning_gym.answer_forms``): a malformed answer is a wrong answer no scorer sees, and
every gold is in its form."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("reasoning_gym")

from envs.domains.reasoning_gym import answer_forms  # noqa: E402
from envs.domains.reasoning_gym.answer_forms import FORMS, check_form  # noqa: E402
from envs.domains.reasoning_gym.answer_grammar import GRAMMARS, Refused  # noqa: E402
from envs.domains.reasoning_gym.generator import make_dataset, task_names  # noqa: E402

#: Golds checked per task, at the generator's defaults (as ``gym.make`` without a level); fewer
#: where a gold takes a search to make (``benchmarks/rg_forms_golds.py`` checks hundreds per task).
GOLDS_PER_TASK = 8
SLOW = {"knight_swap": 2, "futoshiki": 3, "zebra_puzzles": 3}


@functools.cache
def golds(task: str) -> tuple[str, ...]:
    n = SLOW.get(task, GOLDS_PER_TASK)
    dataset = make_dataset(task, {}, seed=0, size=n)
    return tuple(str(dataset[i]["answer"]) for i in range(n) if dataset[i]["answer"] is not None)


def test_every_task_with_its_own_scorer_has_a_form_a_grammar_or_number_golds():
    from envs.domains.reasoning_gym.env import NOT_OFFERED, has_own_scorer
    from envs.domains.reasoning_gym.grading import is_number

    own = {t for t in task_names() if has_own_scorer(t) and t not in NOT_OFFERED}
    assert not set(FORMS) & set(GRAMMARS)
    rest = own - set(FORMS) - set(GRAMMARS)
    # The rest are number tasks: the math checker grades them and their scorer never runs.
    not_numbers = {t: g for t in rest for g in golds(t) if not is_number(g)}
    assert not not_numbers, not_numbers
    assert len(FORMS) >= 50


@pytest.mark.parametrize("task", sorted(FORMS))
def test_every_gold_is_in_its_tasks_form(task):
    for gold in golds(task):
        check_form(task, gold)


def test_golds_found_outside_a_form_by_the_wider_sweep_are_in_it():
    # benchmarks/rg_forms_golds.py: time_intervals at level 1 gives a negative day count
    check_form("time_intervals", "-1 days, 16:01:00")


# Answers for the tasks whose generator gives no gold (the scorer checks a plan or a colouring).
NO_GOLD_HONEST = {
    "boxnet": '[{"Agent[0.5, 0.5]": "move(box_red, square[0.5, 1.5])"}, {}]',
    "graph_color": '{"0": 1, "1": 2, "2": 1}',
    "propositional_logic": "(P ∨ Q)", "rubiks_cube": "R U' F2 B", "rush_hour": "A+1 B-2",
}


@pytest.mark.parametrize("task", sorted(NO_GOLD_HONEST))
def test_plans_without_a_gold_are_in_their_form(task):
    check_form(task, NO_GOLD_HONEST[task])


# A few malformed answers per answer type, each refused before its scorer sees it.
MALFORMED = [
    ("sudoku", "1 2 3\n4 x 6"), ("sudoku", "[[1, 2], [3, 4]]"), ("arc_agi", "1 2\n3 4\x00"),
    ("pool_matrix", "1.5 2..5"), ("kakurasu", ""), ("game_of_life", "[[0, 1], [1, 0]"),
    ("game_of_life", '[[0, "1"]]'), ("group_anagrams", '["ab", "ba"]'), ("jugs", '{"fill": "A"}'),
    ("knight_swap", "Maybe"), ("graph_color", '{"0": "red"}'), ("boxnet", "move box"),
    ("coin_flip", "0.5 or 0.25"), ("coin_flip", "1/2/3"), ("power_function", "about 3.2"),
    ("power_function", "nan?"), ("bitwise_arithmetic", "0xZZ"), ("polynomial_equations", "x = 2"),
    ("path_star", "1, 2, 3"), ("color_cube_rotation", "cyan or gold"), ("palindrome_generation", "ab ba"),
    ("spell_backward", "olleh!"), ("word_ladder", "PEGS BEGS BEES"), ("word_sorting", "a,, b"),
    ("cryptarithm", "A=10"), ("fraction_simplification", "3/4 or 6/8"), ("prime_factorization", "2 + 3"),
    ("quantum_lock", "A, B, C"), ("shortest_path", "north east"), ("sokoban", "RDLX"),
    ("tower_of_hanoi", "Move disk 1 to Peg 3"), ("tsumego", "D4 E5"), ("time_intervals", "5 hours"),
    ("game_of_life_halting", "yes"), ("knights_knaves", "A is a knight.\nB is a knave."),
    ("emoji_mystery", "   "), ("complex_arithmetic", "3 + 4k"), ("ab", "#C A#"),
    ("advanced_geometry", "(1, 2, 3)"), ("rush_hour", "A+ B-2"), ("rubiks_cube", "R; U"),
    ("calendar_arithmetic", "Friday the 13th"), ("survo", "1 2 3\n4 5 6.5"),
    # A grid is written cell by cell in its cells' notation (kakurasu's scorer keeps the 0/1
    # characters of a line: each of these was read as a 0/1 row and paid).
    ("kakurasu", "0 +0 1"), ("kakurasu", "01 0 0"), ("kakurasu", "0 1 0 9"), ("kakurasu", "01000"),
    ("kakurasu", "0 1 2"), ("sudoku", "05 1\n2 3"), ("sudoku", "+5 1\n2 3"),
    # jugs' scorer reads a move's first two words: each was the move "fill A" or "pour B->A"
    ("jugs", '["fill A junk"]'), ("jugs", '["pour B->A "]'), ("jugs", '["pour  B->A"]'),
    ("jugs", '["Fill A"]'),
    ("quantum_lock", "C → D → B"),  # its scorer keeps A-C only: this was C → B
]


@pytest.mark.parametrize(("task", "answer"), MALFORMED)
def test_a_malformed_answer_is_refused(task, answer):
    with pytest.raises(Refused):
        check_form(task, answer)


def test_a_malformed_answer_never_reaches_the_scorer(monkeypatch):
    import gymnasium as gym

    import envs  # noqa: F401 - registers the envs
    from envs.domains.reasoning_gym import grading

    env = gym.make("grpo/ReasoningGym-v0", task="mini_sudoku").unwrapped
    item = env.pack.task_at("test", 0)

    def no_scorer(*args, **kwargs):
        raise AssertionError("the scorer saw a malformed answer")

    monkeypatch.setattr(grading.WORKER, "score", no_scorer)
    reward, info = env.score(item, env.answer_in_format("1 2 3 4\n2 3 4 1\n3 4 1 2\n4 1 2 three"))
    assert reward == 0.0 and info["reason"] == "not_in_grammar", info
    monkeypatch.undo()
    assert env.score(item, env.gold_completion(item))[0] == 1.0
    assert answer_forms.FORMS["mini_sudoku"] is answer_forms.INTEGER_GRID


# One-value tasks whose scorer pays beside the gold (answer_forms.VALUES), each case first found
# paid (the card's reward search, then attacks around it): coin_flip pays a prefix of the gold's
# digits, or anything within 1e-4; game_of_life_halting pays any non-empty text.
ONE_VALUE = [  # (task, test index, answer, earns): the gold of test 0 is 0.193359375 (99/512)
    ("coin_flip", 0, "0", 0.0), ("coin_flip", 0, "0.19", 0.0), ("coin_flip", 0, "0.1934", 0.0),
    ("coin_flip", 0, "0.1933593751", 0.0), ("coin_flip", 0, "0.193", 0.0),
    ("coin_flip", 0, "99/512", 1.0), ("coin_flip", 0, "198/1024", 0.0),  # not simplified
    ("coin_flip", 0, "99/512/1", 0.0), ("coin_flip", 0, "-99/-512", 0.0),
    ("coin_flip", 0, "0.1933593750", 1.0), ("coin_flip", 0, "1.93359375e-1", 1.0),
    # a billion-digit power of ten was a hang in the grader itself (Fraction builds it)
    ("coin_flip", 0, "1e-999999999", 0.0), ("coin_flip", 0, "193359375e-999999991", 0.0),
    # test 5's gold is the exact 0.9935302734375 rounded to ten digits: both pay, a rounding not
    ("coin_flip", 5, "0.9935302734", 1.0), ("coin_flip", 5, "0.9935302734375", 1.0),
    ("coin_flip", 5, "0.99353", 0.0), ("coin_flip", 5, "0.99", 0.0),
    ("game_of_life_halting", 4, "False", 0.0), ("game_of_life_halting", 4, " True ", 1.0),
    ("game_of_life_halting", 3, "True", 0.0), ("game_of_life_halting", 3, "False", 1.0),
]


# Found by attack beside the search: per-letter partial credit that adds up to a full score.
# spell_backward's 6-letter gold of test 0 ('mosrab') with letters added (its float sum of 1/6s
# is 0.9999999999999999, which its == 1.0 penalty misses); figlet_font's 0.1 a letter in place
# (a word of 11 letters or more, one wrong).
ONE_WORD = [("spell_backward", {}, "{gold}x", 0.0), ("spell_backward", {}, "{gold}zzz", 0.0),
            ("spell_backward", {}, "{upper}", 1.0),
            ("figlet_font", {"min_word_len": 11, "max_word_len": 14}, "{wrong_last}", 0.0),
            ("figlet_font", {"min_word_len": 11, "max_word_len": 14}, "{lower}", 1.0),
            # letter_jumble's scorer pays the words in place: the gold then more words was 1.0
            # (the card's padding check: 30 of 120 padded golds paid)
            ("letter_jumble", {}, "{gold} 12 13", 0.0), ("letter_jumble", {}, "{gold} the", 0.0),
            ("letter_jumble", {}, "{upper}", 1.0)]


@functools.cache
def _test_env(task: str, config: tuple[tuple[str, int], ...]):
    import gymnasium as gym

    import envs  # noqa: F401 - registers the envs

    return gym.make("grpo/ReasoningGym-v0", task=task, split="test", **dict(config)).unwrapped


@pytest.mark.parametrize(("task", "config", "answer", "earns"), ONE_WORD)
def test_letter_credit_never_adds_up_to_a_wrong_word(task, config, answer, earns):
    env = _test_env(task, tuple(sorted(config.items())))
    item = env.pack.task_at("test", 0)
    gold = item["answer"]
    assert env.score(item, env.gold_completion(item))[0] == 1.0
    written = answer.format(gold=gold, upper=gold.upper(), lower=gold.lower(),
                            wrong_last=gold[:-1] + ("Q" if gold[-1] != "Q" else "Z"))
    reward, info = env.score(item, env.answer_in_format(written))
    assert reward == earns, (gold, written, info["reason"])


@pytest.fixture(scope="module")
def rg_envs():
    import gymnasium as gym

    import envs  # noqa: F401 - registers the envs

    made = {t: gym.make("grpo/ReasoningGym-v0", task=t, split="test").unwrapped
            for t in ("coin_flip", "game_of_life_halting")}
    yield made
    for env in made.values():
        env.close()


@pytest.mark.parametrize(("task", "index", "answer", "earns"), ONE_VALUE)
def test_a_one_value_answer_is_paid_at_the_golds_value_only(rg_envs, task, index, answer, earns):
    env = rg_envs[task]
    item = env.pack.task_at("test", index)
    assert env.score(item, env.gold_completion(item))[0] == 1.0
    reward, info = env.score(item, env.answer_in_format(answer))
    assert reward == earns, (item["answer"], info["reason"])


def test_one_value_tasks_are_scorer_tasks_with_a_form():
    assert set(answer_forms.VALUES) <= set(FORMS)
    assert answer_forms.same_value("chain_sum", "anything", {"answer": "3"})
