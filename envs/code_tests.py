"""grpo/CodeTests-v0: Python programs graded by hidden test cases run in the sandbox.

Rewards: ``tests`` (the fraction of test cases passed, each case run in isolation) and ``format``
(the completion has a fenced code block and it compiles). A verdict comes only from the
harness's own per-case record (see ``sandbox.harness``), never from exit codes or output. When
the sandbox itself fails, the verdict's reason is ``sandbox_error`` and
``details["sandbox_error"]`` is True, so a learner can drop the sample instead of scoring it 0.

One ``Sandbox`` is shared by every env in a process (created on first use, closed at exit);
``score`` is thread-safe, and ``grade_many`` grades a group concurrently through the pool.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.verify.verdict import Verdict
from sandbox import Limits, Sandbox, SandboxUnavailable
from sandbox.harness import TestReport, run_tests
from tasks import Task

_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
SANDBOX_LIMITS = Limits(wall_s=30.0, cpu_s=30.0)

_shared: Sandbox | None = None
_shared_lock = threading.Lock()


def shared_sandbox() -> Sandbox:
    """The process-wide sandbox, started on first use (raises ``SandboxUnavailable``)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Sandbox(limits=SANDBOX_LIMITS)
        return _shared


def extract_program(completion: str) -> tuple[str, bool]:
    """The last fenced python block (or untagged block), else the whole text; and whether a
    fenced block was found."""
    blocks = [(lang, body) for lang, body in _FENCE.findall(completion)]
    if blocks:
        return blocks[-1][1], True
    return completion, False


class CodeTestsEnv(TaskEnv):
    env_id: ClassVar[str] = "grpo/CodeTests-v0"
    default_pack: ClassVar[str] = "humaneval"
    default_weights: ClassVar[dict[str, float]] = {"tests": 1.0, "format": 0.1}
    #: Optional: ``setup`` (test set-up code), ``prelude`` (imports put before the program),
    #: ``per_test_s`` (more time per test case) and ``canonical_solution`` (the gold).
    required_fields: ClassVar[tuple[str, ...]] = ("tests",)

    def __init__(self, *args: Any, sandbox: Sandbox | None = None, per_test_s: float = 3.0,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._sandbox = sandbox
        self.per_test_s = per_test_s

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or shared_sandbox()

    def gold_completion(self, task: Task) -> str | None:
        gold = task.fields.get("canonical_solution")
        return None if gold is None else f"```python\n{gold}\n```\n"

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        program, fenced = extract_program(completion)
        tests = list(task["tests"])
        try:
            # A task may allow more time per case (a slow reference solution).
            per_test_s = max(self.per_test_s, float(task.fields.get("per_test_s") or 0.0))
            report = run_tests(
                self.sandbox, task.fields.get("prelude", "") + program, tests,
                setup=task.fields.get("setup", ""), per_test_s=per_test_s,
            )
        except SandboxUnavailable as exc:
            return ({"tests": 0.0, "format": 0.0},
                    Verdict.fail("sandbox_error", program, sandbox_error=True, error=str(exc)))
        return _rewards(report, fenced), _verdict(report, program)

    def grade_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[tuple[float, dict[str, Any]]]:
        """``score`` for each (task, completion) pair, concurrently through the sandbox pool."""
        if len(tasks) != len(completions):
            raise ValueError("grade_many needs as many tasks as completions")
        workers = max(1, self.sandbox.pool_size)
        with ThreadPoolExecutor(workers, thread_name_prefix="grade") as ex:
            return list(ex.map(self.score, tasks, completions))


def _rewards(report: TestReport, fenced: bool) -> dict[str, float]:
    return {
        "tests": report.fraction,
        "format": 1.0 if fenced and report.record_found and report.compiles else 0.0,
    }


def _verdict(report: TestReport, program: str) -> Verdict:
    run = report.run
    details: dict[str, Any] = {
        "passed_cases": report.passed,
        "n_cases": report.n_tests,
        "errors": report.errors,
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
    if len(report.passed) == report.n_tests and report.n_tests > 0:
        return Verdict(True, 1.0, "passed", program, details)
    return Verdict(False, report.fraction, "failed_tests", program, details)
