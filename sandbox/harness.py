"""Running a program against test cases in one sandbox job, with the program and its tests in
separate processes, so that no trick inside the program can reach the verdict.

Inside the job (see ``sandbox.inside``):

- the judge (``judge.py``, the job's main program) is trusted: it holds the nonce, the test
  set-up (the prompt's own helper functions, never the program's copies), the test cases and
  their expected values, runs every assert and comparison, and never executes a line of the
  program; it is non-dumpable, so the program cannot read its memory or file descriptors;
- the program runs in a fresh interpreter of its own (``candidate.py``), under a seccomp filter
  that keeps it from signalling or tracing the judge (``no_signals.py``); each test case is
  served by a forked child of it.

The only thing that crosses is a call of one of the task's entry points: its arguments go out,
and its return value (or an exception's type and message) comes back as plain data
(``plain_data.py``: None, bool, int, float, complex, str, bytes, list, tuple, dict, set,
frozenset, nested, plus Fraction, Decimal, range and drained iterators), decoded by the judge.
What the tests compare is a genuine builtin, whatever the program did: always-equal objects,
lying operators, builtin wrappers (``weakref.proxy``), patched builtins or modules, audit hooks,
exiting early, printing fake results and redefining the prompt's helpers all have nothing to
act on. A returned value outside the format fails its case as ``unserializable_return``.

The judge prints one line, ``<nonce> <record>``; the host trusts nothing else. A case that runs
out of time kills the program's process, and the program's remaining cases fail at once
(``not_run``): a program that hangs costs one timeout, not one per case.
"""

from __future__ import annotations

import ast
import builtins
import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import overload

from sandbox.bundle import bundle
from sandbox.limits import Limits, RunResult

BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))
#: Per-case reasons in ``TestReport.reasons``.
CASE_REASONS = ("passed", "failed", "timeout", "unserializable_return", "program_exited",
                "argument_not_plain", "load_error", "not_run")


@dataclass(frozen=True)
class TestReport:
    """What the judge saw; ``record_found`` is False when the run left no trustworthy record.

    ``reasons`` maps each case index that ran (or could not) to one of ``CASE_REASONS``;
    ``guarded`` says that the program ran under the signal filter in a non-dumpable judge.
    """

    n_tests: int
    passed: list[int] = field(default_factory=list)
    record_found: bool = False
    compiles: bool = False
    loaded: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    run: RunResult | None = None
    reasons: dict[int, str] = field(default_factory=dict)
    guarded: bool = False

    @property
    def fraction(self) -> float:
        return len(self.passed) / self.n_tests if self.n_tests else 0.0

    @property
    def sandbox_error(self) -> bool:
        return self.run is not None and self.run.status == "sandbox_error"


_PARSE_LOCK = threading.Lock()


@overload
def parse(source: str) -> ast.Module: ...
@overload
def parse(source: str, mode: str) -> ast.AST: ...
def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, one at a time: graders run in threads, and CPython 3.11's AST constructor
    keeps a recursion counter that concurrent parses corrupt ("SystemError: AST constructor
    recursion depth mismatch"), which would fail an honest program's grading."""
    with _PARSE_LOCK:
        return ast.parse(source, mode=mode)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names a piece of code defines: assignments, functions, classes, imports, loop targets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def find_entry_points(tests: list[str], setup: str = "") -> list[str]:
    """The program's functions the tests call: every name a test calls that neither the test,
    the set-up nor the builtins define (``candidate`` aside: the judge binds it to the first
    entry point). A task whose function has a builtin's name (``sum``) must declare it."""
    try:
        defined = _bound_names(parse(setup)) | BUILTIN_NAMES | {"candidate"}
    except SyntaxError:
        defined = set(BUILTIN_NAMES) | {"candidate"}
    found: list[str] = []
    for test in tests:
        try:
            tree = parse(test)
        except SyntaxError:
            continue
        own = _bound_names(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id not in defined | own and node.func.id not in found):
                found.append(node.func.id)
    return found


def judge_source() -> str:
    return bundle("judge", ("frames", "plain_data", "seccomp", "no_signals", "judge"))


def candidate_source() -> str:
    return bundle("candidate", ("frames", "plain_data", "candidate"))


def run_tests(
    sandbox, program: str, tests: list[str], *, setup: str = "", per_test_s: float = 3.0,
    total_s: float = 30.0, entry_points: list[str] | None = None, prelude: str = "",
) -> TestReport:
    """Run ``program`` in its own process and each test case (source) in the judge, calling the
    program's ``entry_points`` (default: ``find_entry_points(tests, setup)``).

    ``setup`` is trusted code run once in the judge before the cases (the prompt's helper
    functions, the tests' imports). ``prelude`` runs in the program's own namespace before the
    program (the prompt's imports and helpers, so that a program may call them without
    repeating them); it is the program's copy, never the judge's, and a program that redefines
    a helper changes only its own. Each case may take ``per_test_s``; the whole run at most
    ``total_s`` (raised to fit two cases when ``per_test_s`` is large), after which the
    remaining cases count as failed (``not_run``).
    """
    return run_variants(sandbox, program, tests, [{}], setup=setup, per_test_s=per_test_s,
                        total_s=total_s, entry_points=entry_points, prelude=prelude)[0]


def run_variants(
    sandbox, program: str, tests: list[str], variants: list[dict[str, str]], *,
    setup: str = "", per_test_s: float = 3.0, total_s: float = 30.0,
    entry_points: list[str] | None = None, prelude: str = "",
) -> list[TestReport]:
    """``run_tests`` once per variant, in one sandbox job: a variant binds entry points to other
    functions of ``program`` (``{"f": "always_true"}``), so several trivial programs are graded
    for the cost of one run. One report per variant."""
    n = max(1, len(variants))
    budget = min(2.0 + n * len(tests) * (per_test_s + 0.5),
                 max(n * total_s, 2.0 + 2 * per_test_s))
    base = sandbox.limits
    limits = Limits(wall_s=budget + 2.0, cpu_s=budget + 2.0, memory_mb=base.memory_mb,
                    pids=base.pids, output_bytes=base.output_bytes, disk_mb=base.disk_mb,
                    cpus=base.cpus)
    nonce = secrets.token_hex(16)
    names = list(entry_points) if entry_points else find_entry_points(tests, setup)
    spec = {
        "program": program,
        "prelude": prelude,
        "setup": setup,
        "tests": list(tests),
        "entry_points": names,
        "variants": list(variants) or [{}],
        "per_test_s": per_test_s,
        "budget_s": budget,
        "candidate_source": candidate_source(),
    }
    stdin = nonce + "\n" + json.dumps(spec) + "\n"
    run = sandbox.run(judge_source(), stdin=stdin, limits=limits)
    return read_reports(run, nonce, len(tests), n)


def read_reports(run: RunResult, nonce: str, n_tests: int, n_variants: int = 1
                 ) -> list[TestReport]:
    """One report per variant, from the judge's record line (the one that starts with the
    nonce); without a record, reports that say so. A run whose container was left dirty
    (``dirty_container``) has no trustworthy record: the job fails, whatever the judge wrote."""
    if run.status == "dirty_container":
        return [TestReport(n_tests, run=run) for _ in range(n_variants)]
    record = None
    for line in run.stdout.splitlines():
        if line.startswith(nonce + " "):
            try:
                record = json.loads(line[len(nonce) + 1:])
            except ValueError:
                record = None
    if not isinstance(record, dict):
        return [TestReport(n_tests, run=run) for _ in range(n_variants)]
    runs = record.get("runs")
    if not isinstance(runs, list):
        runs = []
    loaded = bool(record.get("loaded"))
    common = {str(k): str(v) for k, v in (record.get("errors") or {}).items()}
    reports = []
    for v in range(n_variants):
        one = runs[v] if v < len(runs) and isinstance(runs[v], dict) else {}
        passed = [i for i in one.get("passed", []) if isinstance(i, int) and 0 <= i < n_tests]
        reasons = {}
        for k, r in (one.get("reasons") or {}).items():
            if str(k).isdigit() and int(k) < n_tests and r in CASE_REASONS:
                reasons[int(k)] = r
        errors = {**common, **{str(k): str(e) for k, e in (one.get("errors") or {}).items()}}
        reports.append(TestReport(
            n_tests=n_tests, passed=sorted(set(passed)) if loaded else [], record_found=True,
            compiles=bool(record.get("compiles")), loaded=loaded, errors=errors, run=run,
            reasons=reasons, guarded=bool(record.get("guarded"))))
    return reports
