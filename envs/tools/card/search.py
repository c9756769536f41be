"""A black-box reward search on the report card (``statistical.reward_search``): no list of
known hacks finds the next class, so the card also climbs the reward itself.

Per task, a population starts from shallow seeds (``env.shallow_completions``, the empty string,
the prompt's numbers and words, each in the answer's usual containers) and grows by mutation:
tokens (a number or a word of the prompt swapped in, a number nudged, a token dropped or
repeated), notation (a number as a fraction, ``\\over``, a division, a decimal, a percentage,
a unit word, ``\\text{}``) and containers (``\\boxed{}``, a set, a tuple, an interval, a list,
a JSON object, an ``<answer>`` tag, a code fence, two answers hedged). Each generation takes a
parent from each task's best (ties at random), mutates it one to three times, and grades the
children in one batch through the env's own ``score`` (``envs.tools.card.grading``); the budget is the
number of graded completions per env, spread over the tasks.

A completion is **paid** when the env passes it; it is **wrong** unless the gold's own check
(``envs.tools.card.reference``) finds it correct. The figure is the best reward (the skill part, as a
fraction of the maximum) of a completion that is not correct; a paid wrong answer fails the
check and is shown in its note. Seeded: the same env, tasks, budget and seed search alike.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from envs.base import TaskEnv
from envs.tools.card import reference
from envs.tools.card.grading import Graded
from tasks import Task

#: Graded completions per env: a full card's, a fast card's (CI), and a sandboxed env's
#: (each completion there is a container run).
FULL_BUDGET = 2000
FAST_BUDGET = 64
FULL_BUDGET_SANDBOXED = 60
FAST_BUDGET_SANDBOXED = 4
#: Children graded per task and generation.
CHILDREN = 4
#: Prompt tokens the mutations draw from, and the longest completion the search writes.
PROMPT_TOKENS = 40
MAX_CHARS = 400

_TOKEN = re.compile(r"\\[A-Za-z]+|-?\d+(?:\.\d+)?|[A-Za-z]+|\s+|.", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{1,}")
CONTAINERS = (
    "\\boxed{{{}}}", "\\boxed{{\\{{{}\\}}}}", "\\boxed{{({})}}", "\\boxed{{[{}]}}",
    "\\boxed{{\\text{{{}}}}}", "<answer>{}</answer>", "[{}]", '{{"answer": {}}}',
    "```\n{}\n```", "The answer is {}.", "{}, {}", "\\boxed{{{} \\text{{ or }} {}}}",
    "\\{{{}\\}}", "({})", "\\boxed{{{}\\,}}", "\\boxed{{x = {}}}",
)
NOTATIONS = (
    "\\frac{{{2n}}}{{2}}", "{{{2n} \\over 2}}", "{2n}/2", "{n}.0", "{n}\\%", "\\dfrac{{{n}}}{{1}}",
    "{n} \\text{{ lakh}}", "\\text{{{n}}}", "{n}\\,", "\\sqrt{{{sq}}}", "{n} \\div 1", "0{n}",
    "{n}e0", "+{n}", "{n} \\times 10^0", "\\det\\begin{{pmatrix}}{n}\\end{{pmatrix}}",
)


@dataclass
class Found:
    task_id: str
    completion: str
    skill: float
    passed: bool
    correct: bool


@dataclass
class SearchResult:
    queries: int = 0
    tasks: int = 0
    #: The best skill fraction of a completion that is not correct, and that completion.
    best_wrong: float = 0.0
    best: Found | None = None
    paid_wrong: list[Found] = field(default_factory=list)
    #: Completions the search found correct (by the reference): reached, never counted.
    correct: int = 0


Grader = Callable[[list[tuple[Task, str]]], list[Graded]]


class _Pool:
    """One task's population: every completion graded so far, and their fitness."""

    def __init__(self, task: Task, prompt: str):
        self.task = task
        self.seen: dict[str, float] = {}
        tokens = [t for t in _TOKEN.findall(prompt) if _NUMBER.fullmatch(t) or _WORD.fullmatch(t)]
        numbers = [t for t in tokens if _NUMBER.fullmatch(t)]
        self.numbers = list(dict.fromkeys(numbers))[:PROMPT_TOKENS] or ["0", "1"]
        self.words = list(dict.fromkeys(t for t in tokens if not _NUMBER.fullmatch(t))
                          )[:PROMPT_TOKENS] or ["yes"]

    def parent(self, rng: random.Random) -> str:
        ranked = sorted(self.seen.items(), key=lambda kv: (-kv[1], kv[0]))
        top = [c for c, f in ranked if f >= ranked[0][1] - 1e-9][:8]
        return rng.choice(top if rng.random() < 0.8 else [c for c, _ in ranked[:16]])


def seeds(env: TaskEnv, task: Task, pool: _Pool, rng: random.Random) -> list[str]:
    """The shallow starting points: the env's own shallow completions, the empty string, and
    the prompt's numbers and words in a few containers."""
    out = [""]
    # A raising hook is the card's adversarial check's to report.
    with contextlib.suppress(Exception):
        out += list(env.shallow_completions(task).values())
    for token in pool.numbers[:4] + pool.words[:2]:
        out += [token, f"\\boxed{{{token}}}", f"<answer>{token}</answer>", f'"{token}"']
    rng.shuffle(out)
    return [c[:MAX_CHARS] for c in dict.fromkeys(out)]


def mutate(text: str, pool: _Pool, rng: random.Random) -> str:
    """One to three random edits of ``text``: tokens, notation or containers."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        text = rng.choice(_MUTATIONS)(text, pool, rng)
    return text[:MAX_CHARS]


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _swap_token(text: str, pool: _Pool, rng: random.Random) -> str:
    tokens = _tokens(text)
    if not tokens:
        return rng.choice(pool.numbers + pool.words)
    i = rng.randrange(len(tokens))
    tokens[i] = rng.choice(pool.numbers if _NUMBER.fullmatch(tokens[i]) else
                           pool.numbers + pool.words)
    return "".join(tokens)


def _nudge_number(text: str, pool: _Pool, rng: random.Random) -> str:
    spots = list(_NUMBER.finditer(text))
    if not spots:
        return _insert_token(text, pool, rng)
    m = rng.choice(spots)
    value = float(m.group())
    new = rng.choice((value + 1, value - 1, value * 10, -value, value / 2, 0, 1))
    shown = str(int(new)) if float(new).is_integer() else f"{new:g}"
    return text[:m.start()] + shown + text[m.end():]


def _insert_token(text: str, pool: _Pool, rng: random.Random) -> str:
    tokens = _tokens(text)
    i = rng.randrange(len(tokens) + 1)
    tokens.insert(i, rng.choice(pool.numbers + pool.words + [" ", ", ", " + ", " or "]))
    return "".join(tokens)


def _drop_token(text: str, pool: _Pool, rng: random.Random) -> str:
    tokens = _tokens(text)
    if len(tokens) < 2:
        return text
    del tokens[rng.randrange(len(tokens))]
    return "".join(tokens)


def _repeat_span(text: str, pool: _Pool, rng: random.Random) -> str:
    if not text:
        return rng.choice(pool.numbers)
    i, j = sorted(rng.sample(range(len(text) + 1), 2)) if len(text) > 1 else (0, len(text))
    return text[:j] + " " + text[i:j] + text[j:]


def _notation(text: str, pool: _Pool, rng: random.Random) -> str:
    spots = [m for m in _NUMBER.finditer(text) if "." not in m.group()]
    if not spots:
        return _container(text, pool, rng)
    m = rng.choice(spots)
    n = int(m.group())
    form = rng.choice(NOTATIONS).format(n=n, **{"2n": 2 * n, "sq": n * n})
    return text[:m.start()] + form + text[m.end():]


def _inner(text: str) -> str:
    """The answer inside the outermost box or tag, else the text."""
    found = re.search(r"\\boxed\{(.*)\}|<answer>(.*)</answer>", text, re.S)
    return next((g for g in found.groups() if g is not None), text) if found else text


def _container(text: str, pool: _Pool, rng: random.Random) -> str:
    inner = _inner(text) if rng.random() < 0.7 else text
    form = rng.choice(CONTAINERS)
    other = rng.choice(pool.numbers + [inner])
    return form.format(inner, other) if form.count("{}") == 2 else form.format(inner)


def _crossover(text: str, pool: _Pool, rng: random.Random) -> str:
    other = rng.choice(list(pool.seen)) if pool.seen else ""
    cut_a, cut_b = rng.randint(0, len(text)), rng.randint(0, len(other))
    return text[:cut_a] + other[cut_b:]


_MUTATIONS = (_swap_token, _swap_token, _nudge_number, _insert_token, _drop_token,
              _repeat_span, _notation, _notation, _container, _container, _crossover)


def search(env: TaskEnv, tasks: Sequence[Task], grader: Grader, *, budget: int,
           seed: int = 0, progress: Callable[[int, int], None] | None = None
           ) -> SearchResult:
    """Climb ``env``'s reward over ``tasks`` with ``budget`` graded completions (module doc)."""
    rng = random.Random(f"{seed}:search:{env.env_id}:{env.pack.name}")
    tasks = [t for t in tasks if reference.usable(env, t)]
    result = SearchResult(tasks=len(tasks))
    if not tasks or budget < 1:
        return result
    pools = [_Pool(t, env.pack.prompt(t)) for t in tasks]
    # Seeds first, spread evenly (each task gets its share, at least one), then generations.
    share = max(1, budget // (2 * len(pools)))
    batch = [(p, c) for p in pools for c in seeds(env, p.task, p, rng)[:share]]
    while result.queries < budget:
        batch = batch[:budget - result.queries]
        if not batch:
            break
        _grade(env, batch, grader, result)
        if progress is not None:
            progress(result.queries, budget)
        batch = []
        for pool in pools:
            for _ in range(CHILDREN):
                child = _fresh(pool, rng)
                if child is not None:
                    batch.append((pool, child))
        rng.shuffle(batch)
    result.paid_wrong.sort(key=lambda f: (f.task_id, f.completion))
    return result


def _fresh(pool: _Pool, rng: random.Random) -> str | None:
    for _ in range(20):  # an unseen child, if a few tries find one
        child = mutate(pool.parent(rng), pool, rng)
        if child not in pool.seen:
            pool.seen[child] = float("-inf")  # claimed: graded in this batch
            return child
    return None


def _grade(env: TaskEnv, batch: list[tuple[_Pool, str]], grader: Grader,
           result: SearchResult) -> None:
    graded = grader([(pool.task, completion) for pool, completion in batch])
    result.queries += len(batch)
    for (pool, completion), g in zip(batch, graded, strict=True):
        if not g.usable:
            pool.seen[completion] = -1.0
            continue
        right = (g.passed or g.skill > 0) and reference.correct(env, pool.task, completion)
        # Correct answers stay parents (a hack is often one edit from one) but rank below
        # any wrong answer that earns as much.
        fitness = g.skill + (1.0 if g.passed else 0.0) + 0.01 * g.frac - (1.5 if right else 0)
        pool.seen[completion] = fitness
        if right:
            result.correct += 1
            continue
        found = Found(pool.task.id, completion, g.skill, g.passed, False)
        if result.best is None or (g.passed, g.skill) > (result.best.passed, result.best.skill):
            result.best, result.best_wrong = found, g.skill
        if g.passed:
            result.paid_wrong.append(found)
