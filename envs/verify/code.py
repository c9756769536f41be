"""The code verifier (grpo/CodeTests-v0's): the program a completion gives, which test cases
its prompt shows, and the rewards and ``Verdict`` of a sandbox run's ``TestReport``.

Shown cases: a record's ``shown_tests`` lists the cases its prompt shows; a case equal to one
(compared as parsed code) earns nothing, unless every case is shown. ``verdict`` comes only from
the judge's record (``sandbox.harness``), never from exit codes or output.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from envs.verify.verdict import Verdict
from sandbox.harness import TestReport, parse
from tasks import Task

#: A fenced block, its language tag python, py or none; the program is the last one.
FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_program(completion: str) -> tuple[str, bool]:
    """The last fenced python block (or untagged block), else the whole text; and whether a
    fenced block was found."""
    blocks = [(lang, body) for lang, body in FENCE.findall(completion)]
    if blocks:
        return blocks[-1][1], True
    return completion, False


def task_entry_points(task: Task) -> list[str] | None:
    """The program's functions the task's tests call (``entry_point``: a name or a list), or
    None to find them in the tests (see ``sandbox.harness.find_entry_points``)."""
    declared = task.fields.get("entry_point")
    if declared is None:
        return None
    return [declared] if isinstance(declared, str) else [str(n) for n in declared]


def _normal(test: str) -> str:
    try:
        return ast.dump(parse(test))
    except (SyntaxError, ValueError):
        return " ".join(test.split())


def shown_cases(tests: Sequence[str], shown_tests: Sequence[str]) -> list[int]:
    """Indices of the cases of ``tests`` that equal a shown test (as parsed code)."""
    if isinstance(shown_tests, str):
        raise TypeError("shown_tests must be a list of test cases, not a string")
    shown = {_normal(t) for t in shown_tests}
    return [i for i, t in enumerate(tests) if _normal(t) in shown]


def _graded(report: TestReport, shown: Sequence[int]) -> list[int]:
    """The cases the reward counts: the hidden ones, or all of them when every case is shown."""
    hidden = [i for i in range(report.n_tests) if i not in set(shown)]
    return hidden or list(range(report.n_tests))


def case_kinds(task: Task) -> tuple[list[int], list[int]]:
    """(the shown cases, the unpublished ones) of a task's ``tests``, as indices."""
    tests = list(task["tests"])
    return (shown_cases(tests, task.fields.get("shown_tests") or ()),
            shown_cases(tests, task.fields.get("unpublished_tests") or ()))


def fraction(report: TestReport, shown: Sequence[int], unpublished: Sequence[int] = ()
             ) -> float:
    """The share of the graded cases (hidden ones; all when every case is shown) passed;
    where some of them are unpublished, at most the share of those passed: a benchmark's own
    cases are public, and a program holding them in a table earns only what it earns on cases
    it could not have seen."""
    graded = _graded(report, shown)
    passed = set(report.passed)
    share = sum(i in passed for i in graded) / len(graded) if graded else 0.0
    private = [i for i in graded if i in set(unpublished)]
    if private:
        share = min(share, sum(i in passed for i in private) / len(private))
    return share


def rewards(report: TestReport, fenced: bool, shown: Sequence[int] = (),
            unpublished: Sequence[int] = ()) -> dict[str, float]:
    """``tests`` (``fraction``) and ``format`` (a fenced block that compiled and was run)."""
    return {
        "tests": fraction(report, shown, unpublished),
        "format": 1.0 if fenced and report.record_found and report.compiles else 0.0,
    }


def verdict(report: TestReport, program: str, shown: Sequence[int] = (),
            unpublished: Sequence[int] = ()) -> Verdict:
    """The run's ``Verdict``: ``passed`` only when every graded case passed; the reason names
    a sandbox failure, a missing record, a syntax or load error, or the failed cases."""
    run = report.run
    passed = set(report.passed)
    hidden = [i for i in range(report.n_tests) if i not in set(shown)]
    details: dict[str, Any] = {
        "passed_cases": report.passed,
        "n_cases": report.n_tests,
        "shown_cases": list(shown),
        "passed_hidden": sum(i in passed for i in hidden),
        "n_hidden": len(hidden),
        "passed_shown": sum(i in passed for i in shown),
        "n_shown": len(shown),
        "passed_unpublished": sum(i in passed for i in unpublished),
        "n_unpublished": len(unpublished),
        "errors": report.errors,
        "case_reasons": {str(i): r for i, r in sorted(report.reasons.items())},
        "status": run.status if run else None,
        "sandbox_error": report.sandbox_error,
    }
    if report.sandbox_error:
        details["error"] = run.error if run else ""
        return Verdict.fail("sandbox_error", program, **details)
    if not report.record_found:
        # The program killed the recorder, blew a limit of the whole run, or hid the record.
        reason = run.status if run and run.status != "ok" else "no_record"
        return Verdict(False, 0.0, reason, program, details)
    if not report.compiles:
        return Verdict(False, 0.0, "syntax_error", program, details)
    if not report.loaded:
        return Verdict(False, 0.0, "load_error", program, details)
    graded = _graded(report, shown)
    if graded and all(i in passed for i in graded):
        return Verdict(True, 1.0, "passed", program, details)
    return Verdict(False, fraction(report, shown, unpublished), _failure_reason(report, graded),
                   program, details)


def _failure_reason(report: TestReport, graded: Sequence[int]) -> str:
    """``failed_tests``, or the one reason every failed graded case shares when it says more
    (``unserializable_return``, ``timeout``, ``program_exited``)."""
    failed = {report.reasons.get(i, "failed") for i in graded if i not in set(report.passed)}
    if failed <= {"timeout", "not_run"} and "timeout" in report.reasons.values():
        return "timeout"  # the cases after a timeout are not run (``sandbox.inside.judge``)
    if len(failed) == 1 and failed <= {"unserializable_return", "timeout", "program_exited"}:
        return failed.pop()
    return "failed_tests"
