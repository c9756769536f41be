"""What a pyfunc task asks: a ``Form`` is one kind of function with drawn parameters.

A form carries the function's argument names, a one-line spec (``returns x times {a} plus
{b}``), the reference body (``return x * {a} + {b}``) and how to draw parameters and inputs.
The number levels (1-4) are here; strings and lists (5-6) are in ``tasks.pyfunc.sequences``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Params = dict[str, Any]
Inputs = Callable[[random.Random, Params], tuple[Any, ...]]

#: Names any form may get instead of its own (a model must read the spec, not the name).
GENERIC_NAMES = ("compute", "calc", "transform", "apply_rule", "f", "g", "func", "solve")


@dataclass(frozen=True)
class Form:
    names: tuple[str, ...]  # function names fitting the spec
    args: tuple[str, ...]
    spec: str  # "returns ..." (str.format over the params)
    body: str  # the reference body, lines joined by "\n" (str.format over the params)
    inputs: Inputs  # one call's arguments
    params: Callable[[random.Random], Params] = field(default=lambda rng: {})
    #: Arguments every task of the form tests among its hidden cases: a threshold itself, the
    #: ends of a range, zero. Random inputs rarely hit them, and without them an off-by-one
    #: comparison (``n > 8`` for "at least 8") passes every case.
    edges: Callable[[Params], tuple[tuple[Any, ...], ...]] = field(default=lambda p: ())


def ints(lo: int, hi: int, n: int = 1) -> Inputs:
    """``n`` independent integers in ``[lo, hi]``."""
    return lambda rng, p: tuple(rng.randint(lo, hi) for _ in range(n))


def around(name: str, spread: int, n: int = 1) -> Inputs:
    """Integers near the parameter ``name`` (a threshold), so both branches are taken."""
    return lambda rng, p: tuple(rng.randint(p[name] - spread, p[name] + spread) for _ in range(n))


def draw(**ranges: tuple[int, int] | tuple[Any, ...]) -> Callable[[random.Random], Params]:
    """Parameters: ``a=(2, 9)`` is an integer in that range, ``c=("x", "y", "z")`` a choice
    (a tuple of other than two ints)."""
    def params(rng: random.Random) -> Params:
        out = {}
        for key, spec in ranges.items():
            is_range = len(spec) == 2 and all(type(v) is int for v in spec)
            out[key] = rng.randint(*spec) if is_range else rng.choice(spec)
        return out
    return params


def _multiples(rng: random.Random, p: Params) -> tuple[int]:
    # Half the inputs are multiples of k, so the answers are not all False.
    k = p["k"]
    return (rng.randint(-6, 12) * k if rng.random() < 0.5 else rng.randint(-40, 60),)


def _digits_with(rng: random.Random, p: Params) -> tuple[int]:
    # A number whose digits are often d, so the counts differ from case to case.
    digits = [str(p["d"]) if rng.random() < 0.4 else str(rng.randint(0, 9))
              for _ in range(rng.randint(1, 7))]
    return (int("1" + "".join(digits)),)


def _zero(n: int) -> Callable[[Params], tuple[tuple[int, ...], ...]]:
    return lambda p: ((0,) * n,)


#: Edges: zero for every argument; two equal arguments; a multiple's neighbours.
ZERO_X = _zero(1)
ZERO_XY = lambda p: ((0, 0), (0, 5))  # noqa: E731
SAME_AB = lambda p: ((0, 0), (7, 7))  # noqa: E731
EITHER_AB = lambda p: ((0, -1), (-1, 0))  # noqa: E731
MULTIPLE_EDGES = lambda p: ((0,), (p["k"] - 1,), (p["k"],))  # noqa: E731

def _range_ends(rng: random.Random) -> Params:
    # Ends of unlike parity: else "n is even" (or odd) answers all four edge cases.
    lo, hi = rng.randint(2, 20), rng.randint(25, 39)
    return {"lo": lo, "hi": hi + 1 if (hi - lo) % 2 == 0 else hi}


X = ("x",)
N = ("n",)
XY = ("x", "y")
AB = ("a", "b")

LEVEL1 = (
    Form(("scale_add", "times_plus", "mul_add", "linear"), X,
         "returns x times {a} plus {b}", "return x * {a} + {b}", ints(-10, 30),
         draw(a=(2, 9), b=(1, 20)), edges=ZERO_X),
    Form(("scale_sub", "times_minus", "mul_sub"), X,
         "returns x times {a} minus {b}", "return x * {a} - {b}", ints(-10, 30),
         draw(a=(2, 9), b=(1, 20)), edges=ZERO_X),
    Form(("add_const", "shift_up", "plus_n", "increase"), X,
         "returns x plus {b}", "return x + {b}", ints(-20, 60), draw(b=(2, 50)), edges=ZERO_X),
    Form(("sub_const", "shift_down", "minus_n", "decrease"), X,
         "returns x minus {b}", "return x - {b}", ints(-20, 60), draw(b=(2, 50)), edges=ZERO_X),
    Form(("scale", "multiply", "times_n", "magnify"), X,
         "returns x times {a}", "return x * {a}", ints(-10, 30), draw(a=(3, 12)), edges=ZERO_X),
    Form(("add_then_scale", "shift_scale", "plus_times"), X,
         "returns x plus {b}, all times {a}", "return (x + {b}) * {a}", ints(-10, 30),
         draw(a=(2, 9), b=(1, 20)), edges=ZERO_X),
    Form(("square_plus", "square_add", "sq_shift"), X,
         "returns x times x plus {b}", "return x * x + {b}", ints(-10, 15), draw(b=(1, 20)), edges=ZERO_X),
    Form(("int_divide", "div_down", "share"), N,
         "returns n divided by {a}, rounded down (n // {a})", "return n // {a}", ints(0, 100),
         draw(a=(2, 9)),
         edges=lambda p: ((0,), (p["a"] - 1,), (p["a"],))),
    Form(("remainder", "mod_n", "leftover"), N,
         "returns the remainder of n divided by {a}", "return n % {a}", ints(0, 100),
         draw(a=(3, 9)),
         edges=lambda p: ((0,), (p["a"],))),
)

LEVEL2 = (
    Form(("weighted_sum", "scale_first", "mix"), XY,
         "returns x times {a} plus y", "return x * {a} + y", ints(-10, 30, 2), draw(a=(2, 9)), edges=ZERO_XY),
    Form(("scale_second", "add_scaled", "blend"), XY,
         "returns x plus y times {a}", "return x + y * {a}", ints(-10, 30, 2), draw(a=(2, 9)), edges=ZERO_XY),
    Form(("product_plus", "mul_then_add", "times_add"), XY,
         "returns x times y plus {c}", "return x * y + {c}", ints(-10, 15, 2), draw(c=(1, 20)), edges=ZERO_XY),
    Form(("sum_scaled", "add_then_scale", "total_times"), XY,
         "returns the sum of x and y, times {a}", "return (x + y) * {a}", ints(-10, 30, 2),
         draw(a=(2, 9)), edges=ZERO_XY),
    Form(("diff_scaled", "gap_times", "sub_then_scale"), XY,
         "returns x minus y, all times {a}", "return (x - y) * {a}", ints(-10, 30, 2),
         draw(a=(2, 9)), edges=ZERO_XY),
    Form(("combine", "linear2", "weigh"), XY,
         "returns x times {a} plus y times {b}", "return x * {a} + y * {b}", ints(-10, 20, 2),
         draw(a=(2, 9), b=(2, 9)), edges=ZERO_XY),
    Form(("square_plus_y", "sq_add", "square_shift"), XY,
         "returns x times x plus y", "return x * x + y", ints(-10, 15, 2), edges=ZERO_XY),
    Form(("product_minus", "times_less", "mul_sub_x"), XY,
         "returns x times y minus x", "return x * y - x", ints(-10, 15, 2), edges=ZERO_XY),
    Form(("average_down", "mean_floor", "midpoint"), XY,
         "returns the average of x and y, rounded down ((x + y) // 2)", "return (x + y) // 2",
         ints(-20, 50, 2), edges=lambda p: ((0, 0), (-3, 0))),
    Form(("perimeter", "fence_length", "border"), ("width", "height"),
         "returns the perimeter of a width by height rectangle", "return 2 * (width + height)",
         ints(1, 40, 2), edges=lambda p: ((1, 1),)),
    Form(("total_cost", "bill", "price_total"), ("price", "count"),
         "returns price times count plus a fee of {c}", "return price * count + {c}",
         ints(1, 30, 2), draw(c=(1, 15)), edges=lambda p: ((1, 1),)),
)

LEVEL3 = (
    Form(("larger", "bigger", "max_of_two", "pick_max"), AB,
         "returns the larger of a and b", "return a if a > b else b", ints(-30, 30, 2), edges=EITHER_AB),
    Form(("smaller", "lesser", "min_of_two", "pick_min"), AB,
         "returns the smaller of a and b", "return a if a < b else b", ints(-30, 30, 2), edges=EITHER_AB),
    Form(("distance", "abs_diff", "gap"), AB,
         "returns the absolute difference of a and b", "return abs(a - b)", ints(-30, 30, 2), edges=SAME_AB),
    Form(("parity", "even_or_odd", "parity_word"), N,
         "returns 'even' if n is even and 'odd' otherwise",
         "if n % 2 == 0:\n    return 'even'\nreturn 'odd'", ints(-30, 60), edges=lambda p: ((0,), (-1,))),
    Form(("sign", "sign_of", "direction"), N,
         "returns 1 if n is positive, -1 if n is negative and 0 if n is zero",
         "if n > 0:\n    return 1\nif n < 0:\n    return -1\nreturn 0",
         lambda rng, p: (rng.choice((0, rng.randint(-30, -1), rng.randint(1, 30))),),
         edges=lambda p: ((0,), (1,), (-1,),)),
    Form(("divisible", "is_multiple", "divides"), N,
         "returns True if n is divisible by {k}, otherwise False", "return n % {k} == 0",
         _multiples, draw(k=(3, 9)),  # by 2 is "n is even", a shallow transform
         edges=lambda p: ((0,), (p["k"],), (p["k"] + 2,))),
    Form(("cap", "at_most", "clip_high"), N,
         "returns n, but {hi} if n is larger than {hi}",
         "if n > {hi}:\n    return {hi}\nreturn n", around("hi", 15), draw(hi=(5, 50)),
         edges=lambda p: ((p["hi"] + 1,), (0,))),
    Form(("floor_zero", "non_negative", "relu"), N,
         "returns n if n is positive, otherwise 0", "return n if n > 0 else 0", ints(-30, 30),
         # Not 0: both `return n` and `return 0` answer it (as both branches do).
         edges=lambda p: ((1,), (-1,))),
    Form(("bump", "step_rule", "adjust"), X,
         "returns x times 2 if x is greater than {t}, otherwise x plus {c}",
         "if x > {t}:\n    return x * 2\nreturn x + {c}", around("t", 12),
         draw(t=(0, 20), c=(1, 9)), edges=lambda p: ((p["t"],), (p["t"] + 1,), (0,),)),
    Form(("size_word", "big_or_small", "label"), N,
         "returns 'big' if n is at least {t}, otherwise 'small'",
         "return 'big' if n >= {t} else 'small'", around("t", 15), draw(t=(5, 50)),
         edges=lambda p: ((p["t"],), (p["t"] - 1,), (0,),)),
    Form(("in_range", "between", "within"), N,
         "returns True if n is between {lo} and {hi} (both included), otherwise False (n is "
         "positive)", "return {lo} <= n <= {hi}",
         # Positive: with 0 among the hidden cases (for `... or n == 0`), bool(n) would answer
         # it and every True case.
         lambda rng, p: (rng.randint(max(1, p["lo"] - 12), p["lo"] + 12),),
         _range_ends,
         edges=lambda p: ((p["lo"],), (p["hi"],), (p["lo"] - 1,), (p["hi"] + 1,))),
)

LEVEL4 = (
    Form(("sum_to", "total_up_to", "triangle"), N,
         "returns the sum of the integers from {lo} to n (0 when n is less than {lo})",
         "total = 0\nfor i in range({lo}, n + 1):\n    total += i\nreturn total",
         ints(0, 40), draw(lo=(1, 12)),
         edges=lambda p: ((0,), (p["lo"] - 1,), (p["lo"],))),
    Form(("sum_of_powers", "power_total", "sum_powers"), N,
         "returns the sum of i ** {p} for i from {lo} to n (0 when n is less than {lo})",
         "total = 0\nfor i in range({lo}, n + 1):\n    total += i ** {p}\nreturn total",
         ints(0, 15), draw(p=(2, 3), lo=(1, 4)),
         edges=lambda p: ((0,), (p["lo"] - 1,), (p["lo"],))),
    Form(("range_product", "product_to", "multiply_range"), N,
         "returns the product of the integers from {lo} to n (1 when n is less than {lo})",
         "result = 1\nfor i in range({lo}, n + 1):\n    result *= i\nreturn result", ints(0, 12),
         draw(lo=(1, 4)),
         edges=lambda p: ((0,), (p["lo"] - 1,), (p["lo"],))),
    Form(("count_multiples", "how_many_divisible", "multiples_up_to"), N,
         "returns how many of the integers from 1 to n are divisible by {k}",
         "count = 0\nfor i in range(1, n + 1):\n    if i % {k} == 0:\n        count += 1\n"
         "return count", ints(0, 80), draw(k=(2, 12)), edges=MULTIPLE_EDGES),
    Form(("sum_multiples", "multiples_total", "add_multiples"), N,
         "returns the sum of the integers from 1 to n that are divisible by {k}",
         "total = 0\nfor i in range(1, n + 1):\n    if i % {k} == 0:\n        total += i\n"
         "return total", ints(0, 80), draw(k=(2, 12)), edges=MULTIPLE_EDGES),
    Form(("digit_sum", "sum_digits", "add_digits"), N,
         "returns the sum of the decimal digits of n (n is not negative)",
         "total = 0\nwhile n > 0:\n    total += n % 10\n    n //= 10\nreturn total",
         ints(0, 99999), edges=lambda p: ((0,), (10,))),
    Form(("count_digit", "digit_count", "how_many_digits"), N,
         "returns how many of the decimal digits of n are {d} (n is positive)",
         "return str(n).count('{d}')",
         _digits_with,
         draw(d=(0, 9)), edges=lambda p: ((int(f"1{p['d']}{p['d']}"),), (1,))),
    Form(("power", "raise_to", "pow_n"), X,
         "returns x multiplied by itself {p} times (x ** {p})",
         "result = 1\nfor _ in range({p}):\n    result *= x\nreturn result", ints(-6, 9),
         draw(p=(3, 7)), edges=lambda p: ((0,), (-1,))),
    Form(("series_sum", "progression_total", "step_sum"), N,
         "returns the sum of the first n terms of {a}, {a2}, {a3}, ... (each term {d} more than "
         "the one before)", "return sum({a} + {d} * i for i in range(n))", ints(0, 20),
         lambda rng: (lambda a, d: {"a": a, "d": d, "a2": a + d, "a3": a + 2 * d})(
             rng.randint(1, 6), rng.randint(2, 5)),
         edges=lambda p: ((0,), (1,))),
    Form(("times_divisible", "factor_count", "strip_factor"), N,
         "returns how many times n can be divided by {k} with no remainder (n is positive)",
         "count = 0\nwhile n % {k} == 0:\n    n //= {k}\n    count += 1\nreturn count",
         lambda rng, p: (p["k"] ** rng.randint(0, 4) * rng.choice((1, 1, 7, 11, 13)),),
         draw(k=(2, 5)), edges=lambda p: ((1,), (p["k"],))),
)
