"""grpo/CodeTests-v0: Python programs graded by hidden test cases run in the sandbox.

Rewards: ``tests`` (the fraction of the *hidden* test cases passed, each case run in isolation)
and ``format`` (the completion has a fenced code block and it compiles). ``passed`` means every
hidden case passed.

Shown tests: a record's optional ``shown_tests`` lists the test cases its prompt shows (MBPP's
example assert, the HumanEval checks whose inputs the docstring shows). Every case in ``tests``
runs, but one equal to a shown test (compared as parsed code, so formatting does not matter) earns
nothing: a program that hard-codes what the prompt shows must not score. When every case is
shown, all of them count. Unpublished cases: a record's optional ``unpublished_tests`` lists
cases never published (the amplified cases of HumanEval and MBPP, whose own tests are public and
may be memorised); the reward is then at most the share of those passed, so a lookup table of
the public cases earns only what its fallback earns on the unpublished ones. ``details`` says
which cases were shown (``shown_cases``) and how many hidden and shown cases passed (``passed_hidden``/``n_hidden``, ``passed_shown``/``n_shown``);
``passed_cases`` and ``n_cases`` still cover every case run.

The tests run in a trusted process that never executes the program; the program runs in a
process of its own, and only calls of its entry points cross, as plain data (see
``sandbox.harness``). A record's ``entry_point`` (a name or a list of names) says which of the
program's functions the tests call; without it they are the names the tests call that neither
the tests, the ``setup`` nor the builtins define. ``details["case_reasons"]`` gives each case's
outcome (``passed``, ``failed``, ``timeout``, ``unserializable_return``, ...). A verdict comes
only from the judge's own record, never from exit codes or output. When the sandbox itself fails (no reachable engine, a container
lost), the reward is 0.0 but the info says so: ``info["infra_error"]`` is True (False otherwise),
the verdict's reason is ``sandbox_error`` and ``details["sandbox_error"]`` is True, so a learner
drops the sample instead of scoring it 0 (``envs.base.is_infra_error``). The first such step of
an env also warns (``RuntimeWarning``), naming ``python -m sandbox doctor``.

The program runs as the module ``solution``, never as ``__main__`` (as HumanEval's own harness
runs it: a demo, ``unittest.main()``, ``input()`` or ``sys.exit()`` under ``if __name__ ==
"__main__":`` does nothing), after a record's ``prelude`` in the same namespace (HumanEval's: the
prompt's imports and helper functions, so that a program may call them without repeating them;
the judge's copy of the helpers is the set-up's, which the program cannot touch).

Shallow programs (``task_baselines``): families of programs that return a constant, a shown
answer, a string the prompt shows or a simple transform of one argument. ``trivially_passed``
names those that pay a task in full (``python -m envs validate`` refuses such tasks),
``baseline_scores`` gives each one's fraction, and ``shallow_completions`` writes them as
completions for the report card. ``benchmarks/code_shallow_sweep.py`` runs them over a pack.

One ``Sandbox`` is shared by every env in a process (``envs.sandboxes``: created on first use,
closed at exit); ``score`` is thread-safe, and ``grade_many`` grades a group concurrently through
the pool.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from envs.base import INFRA_ERROR_KEY, TaskEnv, is_infra_error
from envs.contract import ScoreInfo
from envs.domains.code_flags import prints_or_touches_harness
from envs.flags import Flag, text_flags
from envs.grading import grade_batch, infra_verdict, sandbox_pool
from envs.keywords import POSITIVE_SECONDS, check_keywords, instance_of
from envs.perturb import IRRELEVANT, Perturbation, with_instruction
from envs.sandboxes import sandbox_outage, shared_sandbox
from envs.verify import code as code_verify
from envs.verify.code import extract_program, shown_cases, task_entry_points
from envs.verify.verdict import Verdict
from sandbox import Sandbox, SandboxUnavailable
from sandbox.harness import find_entry_points, parse, run_tests, run_variants
from tasks import Task
from tasks.mutants import mutants

#: The function asked outside the training format: reworded, and without Markdown fences.
CODE_PERTURBATIONS = (
    Perturbation("paraphrase", "the instruction reworded, still asking for a fenced block",
                 with_instruction("Implement this in Python. Give the whole function, with any "
                                  "imports it uses, in a ```python block.")),
    Perturbation("no_fences", "no fences in the prompt; asks for plain code without them",
                 with_instruction("Reply with only the complete Python code as plain text, "
                                  "without Markdown code fences or explanations.", unfenced=True)),
    IRRELEVANT,
)

#: Constant programs no task may pay in full (name -> the returned expression).
BASELINES = {
    "None": "None", "True": "True", "False": "False", "0": "0", "1": "1", '""': '""',
    "[]": "[]", "{}": "{}",
}
#: Simple transforms of one argument, tried on each argument a task's calls pass (a name and an
#: expression, with ``{arg}`` the argument's ordinal and ``{a}`` the argument): a task that one
#: of them passes in full asks for a builtin, not a program. One that does not apply raises,
#: which fails its case.
ARGUMENT_TRANSFORMS = {
    "the {arg}": "{a}",
    "the {arg}'s empty value": "type({a})()",
    "the {arg}'s first item": "{a}[0]",
    "the {arg}'s last item": "{a}[-1]",
    "the {arg}'s min": "min({a})",
    "the {arg}'s max": "max({a})",
    "the {arg}'s length": "len({a})",
    "the {arg}'s sum": "sum({a})",
    "the {arg} sorted": "sorted({a})",
    "the {arg} reversed": "{a}[::-1]",
    "the {arg} is even": "{a} % 2 == 0",
    "the {arg} is odd": "{a} % 2 == 1",
    "the {arg} is truthy": "bool({a})",
    "the {arg} as a string": "str({a})",
}
_ORDINALS = ("first", "second", "third", "fourth")
#: Also checked on a record with ``strict_baselines`` (a pack whose tasks are never a bare
#: builtin, such as the procedural ``pyfunc``): arithmetic transforms of the arguments (a
#: name -> the returned expression).
TRANSFORMS = {
    "the first argument negated": "-args[0]",
    "the first argument's abs": "abs(args[0])",
    "the first argument plus 1": "args[0] + 1",
    "the first argument minus 1": "args[0] - 1",
    "the first argument doubled": "args[0] * 2",
    "the first argument squared": "args[0] * args[0]",
    "the sum of the first two arguments": "args[0] + args[1]",
    "the difference of the first two arguments": "args[0] - args[1]",
    "the product of the first two arguments": "args[0] * args[1]",
    "the first argument in upper case": "args[0].upper()",
    "the first argument in lower case": "args[0].lower()",
}
#: Record fields the model never sees: the rest (the prompt's text, its examples) are searched
#: for the literal strings a shallow program could return.
UNSHOWN_FIELDS = frozenset({"tests", "canonical_solution", "setup", "prelude", "challenge_tests",
                            "entry_point", "id", "form", "mutants", "mutant_edits",
                            "unpublished_tests", "equivalent_baselines"})
MAX_LITERALS = 16  # literal strings per task, the first ones shown
MAX_LITERAL_CHARS = 40
MAX_NAMED_FALLBACKS = 3  # of the fallback programs that pay a task, named by trivially_passed
MAX_HIDDEN_ANSWERS = 4  # the most common hidden answers tried as constants
#: Of a ``strict_baselines`` record's graded cases, the most any shallow program may pass:
#: its hidden cases are balanced (as many True as False, every branch taken).
STRICT_SHALLOW_MAX = 0.5


class CodeTestsEnv(TaskEnv):
    env_id: ClassVar[str] = "grpo/CodeTests-v0"
    recipe_file: ClassVar[Path | None] = Path(__file__).with_name("code_tests.toml")
    default_pack: ClassVar[str] = "humaneval"
    default_weights: ClassVar[dict[str, float]] = {"tests": 1.0, "format": 0.1}
    #: Optional: ``setup`` (trusted test set-up code: the prompt's helpers, imports),
    #: ``entry_point`` (the program's function(s) the tests call), ``prelude`` (the prompt's
    #: imports and helpers, run in the program's namespace before it),
    #: ``shown_tests`` (the test cases the prompt shows, which earn no reward),
    #: ``unpublished_tests`` (cases never published: the reward is at most the share of
    #: these passed), ``per_test_s`` (more time per test case), ``canonical_solution`` (the gold),
    #: ``strict_baselines`` (the trivial-program check also runs ``TRANSFORMS``, and no
    #: shallow program may earn more than ``STRICT_SHALLOW_MAX``) and ``mutants`` (the gold
    #: with one edge broken, which must not pass: ``mutants_passed``) or ``mutant_edits``
    #: (the same, stored as places in the gold's mutants: ``mutant_programs``).
    required_fields: ClassVar[tuple[str, ...]] = ("tests",)
    #: The reward is partial (the fraction of the hidden cases passed), and the rule for a
    #: shallow program is: at most this share of any task's cases, never all of them. The
    #: report card reads it (``envs.tools.card``: the shallow and known-hack checks take this
    #: bound for a partially graded env; see docs/report-cards.md for why the reward itself
    #: is not cut at the shallow baseline).
    shallow_share_max: ClassVar[float | None] = STRICT_SHALLOW_MAX
    perturbation_kinds: ClassVar[tuple[Perturbation, ...]] = CODE_PERTURBATIONS

    def __init__(self, *args: Any, sandbox: Sandbox | None = None, per_test_s: float = 3.0,
                 **kwargs: Any):
        check_keywords(self.env_id, sandbox=(sandbox, instance_of(Sandbox)),
                       per_test_s=(per_test_s, POSITIVE_SECONDS))
        super().__init__(*args, **kwargs)
        self._sandbox = sandbox
        self.per_test_s = per_test_s
        self._warned_infra = False

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or shared_sandbox()

    def infra_outage(self) -> str | None:
        """Every test runs in the sandbox: its engine not answering is an outage."""
        return sandbox_outage(self._sandbox)

    def no_signal_hint(self) -> str:
        return ("a bigger model: a small one rarely writes a program that passes a test; or a "
                "larger completion budget, in case the programs are cut off")

    def answer_end(self, text: str) -> int | None:
        """The end of the first fenced block: the prompts ask for the function in one block.
        What a model wrote after it was an explanation or a usage example, often to the token
        limit (41% of the credited samples of a design-card run): prose the grade ignores,
        or a second block that ``extract_program`` (the last block) graded in the function's
        place."""
        block = code_verify.FENCE.search(text)
        return block.end() if block else None

    def flag(self, task: Task | str, completion: str, verdict: Verdict | None = None, *,
             truncated: bool = False, typical_chars: float | None = None) -> list[Flag]:
        """Long or repetitive text, and a graded program that prints or reaches into the test
        harness (exits early, builtins, interpreter state, files, always-equal objects, ...).
        A bare program is normal here, so "no reasoning" does not apply."""
        program, _ = extract_program(completion)
        return (text_flags(completion, truncated=truncated, typical_chars=typical_chars)
                + prints_or_touches_harness(program))

    def hit_time_limit(self, verdict: Verdict) -> bool:
        """A graded case that ran out of time (``case_reasons``), or the program's whole run
        (``status``): either way grading waited for the wall-clock limit."""
        details = verdict.details or {}
        return (super().hit_time_limit(verdict) or details.get("status") == "timeout"
                or "timeout" in (details.get("case_reasons") or {}).values())

    def gold_completion(self, task: Task) -> str | None:
        gold = task.fields.get("canonical_solution")
        return None if gold is None else f"```python\n{gold}\n```\n"

    def score(self, task: Task | str, completion: str) -> tuple[float, ScoreInfo]:
        reward, info = super().score(task, completion)
        info["infra_error"] = is_infra_error(info)
        if info["infra_error"] and not self._warned_infra:
            self._warned_infra = True  # once per env: a training run may hit thousands
            error = info["verdict"].details.get("error") or "the sandbox failed"
            warnings.warn(
                f"{self.env_id}: grading failed in the sandbox, not in the program ({error}); "
                f"such steps return reward 0.0 with info['{INFRA_ERROR_KEY}'] = True. "
                "Run `python -m sandbox doctor` to see what is missing.",
                RuntimeWarning, stacklevel=3)
        return reward, info

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        program, fenced = extract_program(completion)
        tests = list(task["tests"])
        shown, unpublished = code_verify.case_kinds(task)
        try:
            # A task may allow more time per case (a slow reference solution).
            per_test_s = max(self.per_test_s, float(task.fields.get("per_test_s") or 0.0))
            report = run_tests(
                self.sandbox, program, tests, prelude=task.fields.get("prelude", ""),
                setup=task.fields.get("setup", ""), per_test_s=per_test_s,
                entry_points=task_entry_points(task),
            )
        except SandboxUnavailable as exc:
            return {"tests": 0.0, "format": 0.0}, infra_verdict(str(exc), program)
        return (code_verify.rewards(report, fenced, shown, unpublished),
                code_verify.verdict(report, program, shown, unpublished))

    def baseline_scores(self, task: Task) -> dict[str, float]:
        """Each of ``task_baselines(task)`` and ``fallback_baselines(task)`` -> the fraction
        of the task's graded cases it passes (``shallow_scores``)."""
        bodies = {name: f"return {expr}" for name, expr in task_baselines(task).items()}
        return self.shallow_scores(task, bodies | fallback_baselines(task))

    def shallow_scores(self, task: Task, bodies: dict[str, str]) -> dict[str, float]:
        """Each function body of ``bodies`` (a name -> statements, indented by four spaces
        after the first line; the arguments are ``args`` and ``kwargs``) -> the fraction of the
        task's graded cases that the entry points defined with it pass, all of them graded in
        one sandbox run (``run_variants``); raises ``SandboxUnavailable`` when the sandbox
        fails."""
        names = task_entry_points(task) or find_entry_points(
            list(task["tests"]), task.fields.get("setup", ""))
        functions = [f"shallow_{i}" for i in range(len(bodies))]
        program = "".join(f"def {fn}(*args, **kwargs):\n    {body}\n"
                          for fn, body in zip(functions, bodies.values(), strict=True))
        return self._fractions(task, program, list(bodies),
                               [dict.fromkeys(names, fn) for fn in functions], names)

    def trivially_passed(self, tasks: Sequence[Task]) -> dict[str, list[str]]:
        """The shallow programs of ``task_baselines`` that pass every graded case of a task,
        per task that has any, or failing those the ``fallback_baselines`` that do
        (``baseline_scores``, concurrently through the pool)."""
        def check(task: Task) -> tuple[str, list[str]]:
            scores = self.baseline_scores(task)
            paid = [name for name, score in scores.items() if score == 1.0]
            single = set(task_baselines(task))
            named = [n for n in paid if n in single] or paid[:MAX_NAMED_FALLBACKS]
            if not named and task.fields.get("strict_baselines"):
                named = [f"{name} ({score:.2f} of the cases)" for name, score in scores.items()
                         if score > STRICT_SHALLOW_MAX][:MAX_NAMED_FALLBACKS]
            return task.id, named

        with ThreadPoolExecutor(max(1, self.sandbox.pool_size), thread_name_prefix="base") as ex:
            found = dict(ex.map(check, tasks))
        return {tid: names for tid, names in found.items() if names}

    def mutants_passed(self, tasks: Sequence[Task]) -> dict[str, list[str]]:
        """The record's ``mutants`` (the reference with one edge broken: a comparison off by
        one, a dropped zero case, a swapped branch; ``tasks.mutants``) that pass every graded
        case of a task, per task that has any, each named by its edit. One sandbox run per
        task, concurrently through the pool."""
        def check(task: Task) -> tuple[str, list[str]]:
            programs = mutant_programs(task)
            if not programs:
                return task.id, []
            scores = self.variant_scores(task, programs)
            return task.id, [name for name, score in scores.items() if score == 1.0]

        with ThreadPoolExecutor(max(1, self.sandbox.pool_size), thread_name_prefix="mut") as ex:
            found = dict(ex.map(check, tasks))
        return {tid: names for tid, names in found.items() if names}

    def variant_scores(self, task: Task, programs: dict[str, str]) -> dict[str, float]:
        """Each whole program of ``programs`` (a name -> source defining the task's entry
        points) -> the fraction of the task's graded cases it passes, all in one sandbox run
        (each program's functions renamed apart); raises ``SandboxUnavailable`` when the
        sandbox fails."""
        names = task_entry_points(task) or find_entry_points(
            list(task["tests"]), task.fields.get("setup", ""))
        sources, variants = [], []
        for k, (name, source) in enumerate(programs.items()):
            try:
                tree = parse(source)
            except (SyntaxError, ValueError) as exc:
                # One program that does not compile would fail every other one in the job.
                raise ValueError(f"{task.id}: {name}: the program does not parse: {exc}") from None
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
                    node.name = f"variant_{k}_{node.name}"
            sources.append(ast.unparse(tree))
            variants.append({n: f"variant_{k}_{n}" for n in names})
        return self._fractions(task, "\n\n".join(sources) + "\n", list(programs), variants,
                               names)

    def _fractions(self, task: Task, program: str, labels: list[str],
                   variants: list[dict[str, str]], names: list[str]) -> dict[str, float]:
        """One sandbox run of ``program`` with each of ``variants`` bound to the task's entry
        points -> each label's fraction of the graded cases (``verify.code.fraction``)."""
        reports = run_variants(
            self.sandbox, program, list(task["tests"]), variants,
            prelude=task.fields.get("prelude", ""), setup=task.fields.get("setup", ""),
            entry_points=names,
            per_test_s=max(self.per_test_s, float(task.fields.get("per_test_s") or 0.0)))
        if any(r.sandbox_error for r in reports):
            raise SandboxUnavailable(reports[0].run.error if reports[0].run else "")
        shown, unpublished = code_verify.case_kinds(task)
        return {label: code_verify.fraction(r, shown, unpublished)
                for label, r in zip(labels, reports, strict=True)}

    def shallow_completions(self, task: Task) -> dict[str, str]:
        """The default shallow answers and each program of ``task_baselines``, as a model would
        write it: a fenced block defining every entry point to return the baseline's
        expression (the report card's ``statistical.adversarial_floor``)."""
        names = task_entry_points(task) or find_entry_points(
            list(task["tests"]), task.fields.get("setup", "")) or ["solution"]
        shallow = super().shallow_completions(task)
        for name, expr in task_baselines(task).items():
            program = "".join(f"def {fn}(*args, **kwargs):\n    return {expr}\n\n\n"
                              for fn in names)
            shallow[f"returns {name}"] = f"```python\n{program.rstrip()}\n```\n"
        return shallow

    def mutant_completions(self, task: Task) -> dict[str, str]:
        """The record's mutants of its reference (``mutant_programs``), as a model would write
        them: a fenced block (the report card's ``grpo.tpr_tnr``: none may pass)."""
        return {name: f"```python\n{program.rstrip()}\n```\n"
                for name, program in mutant_programs(task).items()}

    def grade_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[tuple[float, ScoreInfo]]:
        """``score`` for each (task, completion) pair, concurrently through the sandbox pool."""
        return grade_batch(self, tasks, completions, backend=sandbox_pool(self))


def task_baselines(task: Task) -> dict[str, str]:
    """The shallow programs ``trivially_passed`` runs on ``task`` (a name -> the returned
    expression), in families: the constants of ``BASELINES``; the shown answers (the value each
    shown case expects); the literal strings the prompt shows (``shown_literals``: 'Not
    matched!'); and ``ARGUMENT_TRANSFORMS`` on each argument the tests pass. With
    ``strict_baselines`` also the first hidden answer as a constant (it pays every case when all
    answers are equal) and the arithmetic ``TRANSFORMS``. ``fallback_baselines`` combines them."""
    constants, transforms = _baseline_parts(task)
    return _not_the_answer(task, constants | transforms)


def fallback_baselines(task: Task) -> dict[str, str]:
    """Each transform of ``task_baselines`` that falls back to each of its constants where it
    raises (a name -> the function body): ``try: return args[0][0]`` / ``except: return
    False`` pays a task whose hidden answers are an argument's first item where it has one and
    False where it has none (mbpp/222), which neither part pays alone."""
    constants, transforms = _baseline_parts(task)
    return _not_the_answer(task, {
        f"{name}, else {const}": (f"try:\n        return {expr}\n"
                                  f"    except Exception:\n        return {value}")
        for name, expr in transforms.items() for const, value in constants.items()})


def _not_the_answer(task: Task, programs: dict[str, str]) -> dict[str, str]:
    """``programs`` less those that are the task's answer by another route (``sorted`` for a
    merge sort: the record's ``equivalent_baselines``, found by ``tasks.amplify``), and each
    such transform falling back to any constant (it never raises where the reference answers;
    the constants here come from the task's cases, which the amplified ones extend)."""
    answer = set(task.fields.get("equivalent_baselines") or ())
    return {name: p for name, p in programs.items()
            if name not in answer and name.split(", else ", 1)[0] not in answer}


def _baseline_parts(task: Task) -> tuple[dict[str, str], dict[str, str]]:
    """(constants, transforms) of ``task_baselines``."""
    constants = dict(BASELINES)
    tests = list(task["tests"])
    shown = set(shown_cases(tests, task.fields.get("shown_tests") or ()))
    answers = [(i, _answer(test)) for i, test in enumerate(tests)]
    constants.update({f"the shown answer {a}": a for i, a in answers if i in shown and a})
    for text in shown_literals(task):
        constants.setdefault(f"the shown string {text!r}", repr(text))
    transforms = {}
    for k in range(min(_arity(task), len(_ORDINALS))):
        for name, expr in ARGUMENT_TRANSFORMS.items():
            transforms[name.format(arg=f"{_ORDINALS[k]} argument")] = expr.format(a=f"args[{k}]")
    # A hidden answer is not shown, but a policy may guess it ('Not matched!' beside a shown
    # 'Found a match!'): the most common ones are constants too.
    hidden = Counter(a for i, a in answers if i not in shown and a)
    for answer, _ in hidden.most_common(MAX_HIDDEN_ANSWERS):
        constants.setdefault(f"the hidden answer {answer}", answer)
    if task.fields.get("strict_baselines"):
        transforms.update(TRANSFORMS)
    return constants, transforms


_QUOTED = re.compile(rf"(?<![\w'\"])(['\"])([^'\"\n]{{0,{MAX_LITERAL_CHARS}}})\1(?!\w)")


def shown_literals(task: Task) -> list[str]:
    """The short literal strings the prompt shows, first shown first (at most
    ``MAX_LITERALS``): string constants of the fields that are code (MBPP's example assert, a
    HumanEval prompt) and quoted text in prose and docstrings (``return 'Yes' ... 'No'``). Read
    from every field a model sees (all but ``UNSHOWN_FIELDS``), so a third-party pack's prompt
    text counts too."""
    found: dict[str, None] = {}
    for key, value in task.fields.items():
        if key in UNSHOWN_FIELDS:
            continue
        for text in [value] if isinstance(value, str) else (
                v for v in value if isinstance(v, str)) if isinstance(value, list) else ():
            try:
                constants = [n.value for n in ast.walk(parse(text))
                             if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            except (SyntaxError, ValueError):
                constants = [text]  # prose: only what it quotes
            else:
                found.update((c, None) for c in constants if len(c) <= MAX_LITERAL_CHARS)
            for constant in constants:
                found.update((m.group(2), None) for m in _QUOTED.finditer(constant))
    return list(found)[:MAX_LITERALS]


def _arity(task: Task) -> int:
    """The most positional arguments a test passes the entry point (or ``candidate``); 1 when
    no call is found."""
    names = set(task_entry_points(task) or find_entry_points(
        list(task["tests"]), task.fields.get("setup", ""))) | {"candidate"}
    most = 0
    for test in task["tests"]:
        try:
            tree = parse(test)
        except (SyntaxError, ValueError):
            continue
        most = max([most] + [len(n.args) for n in ast.walk(tree) if isinstance(n, ast.Call)
                             and isinstance(n.func, ast.Name) and n.func.id in names])
    return most or 1


def _answer(test: str) -> str | None:
    """The literal a case compares against (``assert f(2) == 7`` -> ``7``), as source."""
    try:
        node = parse(test).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None
    compare = node.test if isinstance(node, ast.Assert) else None
    if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1
            and isinstance(compare.ops[0], ast.Eq)):
        return None
    for side in (compare.comparators[0], compare.left):
        try:
            ast.literal_eval(side)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        return ast.unparse(side)
    return None


def mutant_programs(task: Task) -> dict[str, str]:
    """The record's ``mutants`` (``[{"edit": ..., "program": ...}]``) as a name -> program;
    and its ``mutant_edits`` (``[[index, edit], ...]``: the amplified HumanEval and MBPP
    packs, ``tasks.amplify``) rebuilt from the reference (``tasks.mutants.mutants`` of its
    entry point, ``extended``), each named by its place and edit. An edit that no longer
    matches the rebuilt mutant (the reference or the mutation rules changed) raises: the
    stored file must be made again."""
    out = {}
    for m in task.fields.get("mutants") or ():
        if isinstance(m, dict) and isinstance(m.get("program"), str):
            out[f"the reference with {m.get('edit', '?')}"] = m["program"]
    edits = task.fields.get("mutant_edits") or ()
    if edits:
        entries = task_entry_points(task) or []
        rebuilt = mutants(task["canonical_solution"], entries[0] if entries else None,
                          extended=True)
        for index, edit in edits:
            if index >= len(rebuilt) or rebuilt[index].edit != edit:
                raise ValueError(f"{task.id}: stored mutant {index} ({edit}) does not match "
                                 "its reference: run python -m envs.tools.code_amplify again")
            out[f"the reference with {edit} (mutant {index})"] = rebuilt[index].source
    return out
