"""The pyfunc forms over strings (level 5) and lists of integers (level 6)."""

from __future__ import annotations

import random

from tasks.pyfunc.forms import Form, Params, draw

WORDS = (
    "apple", "banana", "cherry", "river", "stone", "garden", "pencil", "window", "rocket",
    "planet", "silver", "candle", "forest", "mango", "tiger", "zebra", "lemon", "orange",
    "python", "kettle", "bridge", "castle", "dragon", "summer", "winter", "yellow", "button",
    "coffee", "puzzle", "jungle", "salad", "paper", "music", "ocean", "cloud", "sun",
    "moon", "star", "book", "tree", "cat", "dog", "bird", "fish", "hello", "world", "data",
    "code", "test", "sky", "sea", "ant", "bee", "cab", "taxi", "violin", "guitar", "piano",
)
PALINDROMES = ("level", "radar", "noon", "civic", "kayak", "refer", "madam", "stats", "wow",
               "racecar", "rotor", "deed", "abba", "a")
LETTERS = "aeinorst"
S = ("s",)
#: Edges: the empty input, a word shorter than a slice, a threshold's length, a lone value.
EMPTY_S = lambda p: (("",),)  # noqa: E731
SHORT_S = lambda p: (("",), ("ab"[:p["k"] - 1],), ("abcdef"[:p["k"]],))  # noqa: E731
LETTER_EDGES = lambda p: (("",), (p["c"],), ("xyz" + p["c"],))  # noqa: E731
LONG_EDGES = lambda p: (("abcdefgh"[:p["k"]],), ("abcdefgh"[:p["k"] + 1],))  # noqa: E731
EMPTY_NUMS = lambda p: ((list[int](),),)  # noqa: E731
THRESHOLD_NUMS = lambda p: ((list[int](),), ([p["t"]],), ([p["t"] + 1],))  # noqa: E731
NUMS = ("nums",)


def _word(rng: random.Random, p: Params) -> tuple[str]:
    return (rng.choice(WORDS),)


def _maybe_palindrome(rng: random.Random, p: Params) -> tuple[str]:
    return (rng.choice(PALINDROMES if rng.random() < 0.5 else WORDS),)


def _with_letter(rng: random.Random, p: Params) -> tuple[str]:
    # Often a word holding the letter, sometimes one without it (the count is then 0).
    holding = [w for w in WORDS if p["c"] in w]
    return (rng.choice(holding if holding and rng.random() < 0.7 else WORDS),)


def _numbers(lo: int, hi: int, min_len: int = 0):
    def inputs(rng: random.Random, p: Params) -> tuple[list[int]]:
        return ([rng.randint(lo, hi) for _ in range(rng.randint(min_len, 7))],)
    return inputs


def _with_value(rng: random.Random, p: Params) -> tuple[list[int]]:
    values = [rng.choice((p["k"], rng.randint(0, 9))) for _ in range(rng.randint(0, 7))]
    return (values,)


def _maybe_value(rng: random.Random, p: Params) -> tuple[list[int]]:
    # Half the lists hold k, at any length: else the longer a list, the likelier it holds k,
    # and len(nums) > 3 answers most cases.
    others = [d for d in range(10) if d != p["k"]]
    values = [rng.choice(others) for _ in range(rng.randint(1, 7))]
    if rng.random() < 0.5:
        values[rng.randrange(len(values))] = p["k"]
    return (values,)


LEVEL5 = (
    Form(("count_letter", "letter_count", "occurrences"), S,
         "returns how many times the letter '{c}' occurs in s", "return s.count('{c}')",
         _with_letter, draw(c=tuple(LETTERS)), edges=EMPTY_S),
    Form(("prefix", "head", "first_chars"), S,
         "returns the first {k} characters of s (all of s if it is shorter)",
         "return s[:{k}]", _word, draw(k=(2, 4)), edges=SHORT_S),
    Form(("suffix", "tail", "last_chars"), S,
         "returns the last {k} characters of s (all of s if it is shorter)",
         "return s[-{k}:]", _word, draw(k=(2, 4)), edges=SHORT_S),
    Form(("shout_backwards", "reverse_upper", "loud_mirror"), S,
         "returns s reversed and in upper case", "return s[::-1].upper()", _word, edges=EMPTY_S),
    Form(("repeat", "echo_n", "copies"), S,
         "returns s repeated {k} times", "return s * {k}", _word, draw(k=(3, 5)), edges=EMPTY_S),
    Form(("wrap", "bracket", "surround"), S,
         "returns s with '{left}' added at the start and '{right}' at the end",
         "return '{left}' + s + '{right}'", _word,
         lambda rng: dict(zip(("left", "right"), rng.choice(
             (("<", ">"), ("[", "]"), ("(", ")"), ("*", "*"), ("#", "#"), ("-", "-"))),
             strict=True)), edges=EMPTY_S),
    Form(("ends", "first_and_last", "outer_letters"), S,
         "returns the first character of s followed by the last one (s is not empty)",
         "return s[0] + s[-1]", _word, edges=lambda p: (("a",), ("ab",))),
    Form(("count_vowels", "vowels", "vowel_count"), S,
         "returns how many characters of s are vowels (a, e, i, o, u)",
         "return sum(1 for ch in s if ch in 'aeiou')", _word, edges=EMPTY_S),
    Form(("swap_letter", "replace_letter", "substitute"), S,
         "returns s with every '{c}' replaced by '{r}'", "return s.replace('{c}', '{r}')",
         _with_letter, draw(c=tuple(LETTERS), r=("*", "_", "#", "-")), edges=EMPTY_S),
    Form(("every_other", "odd_positions", "skip_one"), S,
         "returns every second character of s, starting with the first (s[::2])",
         "return s[::2]", _word, edges=EMPTY_S),
    Form(("is_palindrome", "reads_same", "mirror_word"), S,
         "returns True if s reads the same forwards and backwards, otherwise False",
         "return s == s[::-1]", _maybe_palindrome, edges=lambda p: (("",), ("a",), ("ab",))),
    Form(("capitalize_first", "title_word", "upper_first"), S,
         "returns s with its first letter in upper case and the rest unchanged",
         "return s[:1].upper() + s[1:]", _word, edges=EMPTY_S),
    Form(("add_ending", "append_suffix", "extend_word"), S,
         "returns s followed by '{end}'", "return s + '{end}'", _word,
         draw(end=("ing", "s", "!", "ed", "er", "?")), edges=EMPTY_S),
    Form(("find_letter", "position_of", "index_of_letter"), S,
         "returns the index of the first '{c}' in s, or -1 if s has none",
         "return s.find('{c}')", _with_letter, draw(c=tuple(LETTERS)), edges=LETTER_EDGES),
    Form(("has_letter", "contains_letter", "uses_letter"), S,
         "returns True if the letter '{c}' occurs in s, otherwise False",
         "return '{c}' in s", _with_letter, draw(c=tuple(LETTERS)),
         # Not "": bool(s) would answer it and every True case.
         edges=lambda p: ((p["c"],), ("xyz" + p["c"],))),
    Form(("drop_letter", "remove_letter", "without_letter"), S,
         "returns s with every '{c}' removed", "return s.replace('{c}', '')", _with_letter,
         draw(c=tuple(LETTERS)), edges=EMPTY_S),
    Form(("is_long", "longer_than", "long_word"), S,
         "returns True if s has more than {k} characters, otherwise False",
         "return len(s) > {k}", _word, draw(k=(3, 6)), edges=LONG_EDGES),
    Form(("spaced", "join_letters", "interleave"), S,
         "returns the characters of s with '{c}' between every two of them",
         "return '{c}'.join(s)", _word, draw(c=("-", "*", "_", ".", "+", " ")), edges=EMPTY_S),
    Form(("count_other", "not_letter_count", "others"), S,
         "returns how many characters of s are not the letter '{c}'",
         "return len(s) - s.count('{c}')", _with_letter, draw(c=tuple(LETTERS)), edges=EMPTY_S),
)

LEVEL6 = (
    Form(("sum_evens", "even_total", "add_evens"), NUMS,
         "returns the sum of the even numbers in nums",
         "return sum(v for v in nums if v % 2 == 0)", _numbers(-9, 20), edges=EMPTY_NUMS),
    Form(("count_above", "how_many_greater", "count_over"), NUMS,
         "returns how many numbers in nums are greater than {t}",
         "return sum(1 for v in nums if v > {t})", _numbers(-9, 15), draw(t=(-2, 8)), edges=THRESHOLD_NUMS),
    Form(("sum_above", "total_greater", "add_big"), NUMS,
         "returns the sum of the numbers in nums that are greater than {t}",
         "return sum(v for v in nums if v > {t})", _numbers(-5, 20), draw(t=(0, 10)), edges=THRESHOLD_NUMS),
    Form(("multiples", "keep_divisible", "divisible_only"), NUMS,
         "returns a list of the numbers in nums that are divisible by {k}, in their order",
         "return [v for v in nums if v % {k} == 0]", _numbers(-9, 30), draw(k=(3, 6)), edges=lambda p: (([],), ([0],))),
    Form(("contains", "has_value", "includes"), NUMS,
         "returns True if {k} is in nums (nums is not empty), otherwise False",
         "return {k} in nums",
         # Not empty: with [] among the hidden cases (for `... or not nums`), bool(nums)
         # would answer it and every True case.
         _maybe_value, draw(k=(0, 9)),
         edges=lambda p: (([p["k"]],), ([p["k"] + 1],))),
    Form(("affine_all", "scale_shift_each", "map_linear"), NUMS,
         "returns a list of every number of nums times {k} plus {c}",
         "return [v * {k} + {c} for v in nums]", _numbers(-9, 20),
         draw(k=(2, 5), c=(1, 9)), edges=EMPTY_NUMS),
    Form(("above", "keep_greater", "filter_greater"), NUMS,
         "returns a list of the numbers in nums that are greater than {t}, in their order",
         "return [v for v in nums if v > {t}]", _numbers(-5, 20), draw(t=(0, 10)), edges=THRESHOLD_NUMS),
    Form(("scale_all", "multiply_each", "times_each"), NUMS,
         "returns a list of every number of nums multiplied by {k}",
         "return [v * {k} for v in nums]", _numbers(-9, 20), draw(k=(2, 5)), edges=EMPTY_NUMS),
    Form(("shift_all", "add_to_each", "plus_each"), NUMS,
         "returns a list of every number of nums plus {k}", "return [v + {k} for v in nums]",
         _numbers(-9, 20), draw(k=(1, 9)), edges=EMPTY_NUMS),
    Form(("spread", "value_range", "max_minus_min"), NUMS,
         "returns the largest number in nums minus the smallest (nums is not empty)",
         "return max(nums) - min(nums)", _numbers(-9, 30, min_len=1), edges=lambda p: (([5],),)),
    Form(("sum_squares", "square_total", "squares_sum"), NUMS,
         "returns the sum of the squares of the numbers in nums",
         "return sum(v * v for v in nums)", _numbers(-9, 9), edges=EMPTY_NUMS),
    Form(("count_value", "occurrences_of", "tally"), NUMS,
         "returns how many times {k} occurs in nums", "return nums.count({k})", _with_value,
         draw(k=(0, 9)), edges=lambda p: (([],), ([p["k"]],))),
    Form(("evens", "keep_even", "only_even"), NUMS,
         "returns a list of the even numbers in nums, in their order",
         "return [v for v in nums if v % 2 == 0]", _numbers(-9, 20), edges=lambda p: (([],), ([0],))),
    Form(("first_above", "find_greater", "first_over"), NUMS,
         "returns the first number in nums that is greater than {t}, or -1 if there is none",
         "for v in nums:\n    if v > {t}:\n        return v\nreturn -1", _numbers(-5, 25),
         draw(t=(5, 15)), edges=THRESHOLD_NUMS),
    Form(("sum_even_positions", "alternate_sum", "every_other_total"), NUMS,
         "returns the sum of the numbers at even positions of nums (indexes 0, 2, 4, ...)",
         "return sum(nums[::2])", _numbers(-9, 20), edges=lambda p: (([],), ([4],))),
    Form(("sum_abs", "total_size", "abs_total"), NUMS,
         "returns the sum of the absolute values of the numbers in nums",
         "return sum(abs(v) for v in nums)", _numbers(-20, 20), edges=EMPTY_NUMS),
)
