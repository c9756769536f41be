"""The one door through which a batch of (task, completion) pairs is graded:
``grade_batch(env, tasks, completions)``. The learner (``learner.sampling.scoring.score_all``),
TRL's reward function, the report card, ``python -m envs validate``, a code env's
``grade_many`` and the Ray grading actors all call it.

One never-raise policy: arguments that cannot be a batch (lengths that differ, a completion
that is not a str) are a one-line error; past that, nothing raises. A pair whose grading raised
gets that pair's infrastructure-failure result (``infra_failure_info``: reward 0.0,
``info["infra_error"]`` True, the exception in the verdict's details), so one broken pair
neither hides the others nor counts as a zero the policy earned; a backend that fails as a
whole does the same for each of its pairs.

Backends, each a ``Backend`` (``score_many(tasks, completions)``):
  - ``Threads``: ``env.score`` on a thread pool (the default for an env without a batch path,
    with one thread unless asked for more);
  - ``EnvBatch``: the env's own batch path, its ``grade_many`` (the code envs: their sandbox
    pool, ``sandbox_pool``), one by one on threads when that path itself fails;
  - ``envs.ray_scoring.RayScorer``: the env's copies on the nodes of a Ray cluster.

This module holds the infrastructure-failure vocabulary as well (``INFRA_ERROR_KEY``,
``is_infra_error``, ``infra_verdict``, ``infra_failure_info``) and imports nothing of ``envs``
but the verdict type, so the episode and env modules can build those results through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

from envs.contract import ScoreInfo
from envs.verify.verdict import Verdict
from tasks import Task

#: The ``step``/``score`` info key that is True when the grading infrastructure failed.
INFRA_ERROR_KEY = "infra_error"
#: The verdict reason of a sample the sandbox failed to grade.
SANDBOX_ERROR = "sandbox_error"
#: The verdict reason of a sample whose grading raised (a verifier bug: a result, not a crash).
GRADER_RAISED = "grader_raised"

Result = tuple[float, ScoreInfo]


class Elapsed(float):
    """Seconds spent grading. A measurement, not episode state: any two compare equal, so the
    info dicts of two identical episodes are equal (gymnasium's determinism check relies on it)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Elapsed)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = float.__hash__


class Gradable(Protocol):
    """What grading asks of an env (``envs.base.TaskEnv`` is one)."""

    @property
    def reward_weights(self) -> Mapping[str, float]: ...

    def score(self, task: Task, completion: str) -> Result: ...


class Backend(Protocol):
    """Grades a batch with the results ``env.score`` gives, pair by pair, in order."""

    def score_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[Result]: ...


def is_infra_error(info: Mapping[str, Any]) -> bool:
    """Whether a ``score`` info says the grading infrastructure failed (``sandbox_error``, or the
    grading raised): such a sample says nothing about the policy, so trainers drop it instead of
    scoring it 0."""
    verdict = info.get("verdict")
    details = getattr(verdict, "details", None) or {}
    return (bool(info.get(INFRA_ERROR_KEY)) or bool(details.get("sandbox_error"))
            or info.get("reason") == SANDBOX_ERROR)


def grading_raised(info: Mapping[str, Any]) -> str | None:
    """The exception a sample's grading raised (``"TypeError: ..."``), None if it did not."""
    verdict = info.get("verdict")
    if getattr(verdict, "reason", None) != GRADER_RAISED:
        return None
    return str((getattr(verdict, "details", None) or {}).get("error", ""))


def infra_verdict(error: str, extracted: str | None = None) -> Verdict:
    """The verdict of a sample the sandbox failed to grade."""
    return Verdict.fail(SANDBOX_ERROR, extracted, sandbox_error=True, error=error)


def infra_failure_info(env: Gradable, task: Task | str, error: str, *,
                       raised: BaseException | None = None) -> ScoreInfo:
    """The ``score`` info of a sample that could not be graded: the infrastructure failed
    (``error`` says how) or, with ``raised``, the grading raised that exception. Reward 0.0 for
    every component, not passed, ``info["infra_error"]`` True: trainers drop it."""
    if raised is None:
        verdict = infra_verdict(error)
    else:
        verdict = Verdict.fail(GRADER_RAISED, None, error=error, raised=type(raised).__name__)
    info = _task_info(env, task)
    info.update(rewards={k: 0.0 for k in env.reward_weights}, passed=False,
                reason=verdict.reason, extracted=None, verdict=verdict,
                grading_s=Elapsed(0.0), hit_time_limit=False)
    info[INFRA_ERROR_KEY] = True
    return cast(ScoreInfo, info)  # the task's keys (an env may add its own) and the grade's


def _task_info(env: Any, task: Task | str) -> dict[str, Any]:
    if isinstance(task, str):
        try:
            task = env.pack.get(task)
        except Exception:  # noqa: BLE001 - an unknown id: the result still names it
            return {"task_id": task}
    return env.task_info(task)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]


def grade_one(env: Gradable, task: Task | str, completion: str) -> Result:
    """``env.score(task, completion)``, never raising: an exception is the pair's result."""
    try:
        return env.score(task, completion)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - a verifier bug is a result, not a crash
        return 0.0, infra_failure_info(env, task, _one_line(exc), raised=exc)


def check_batch(tasks: Sequence[Task | str], completions: Sequence[Any]) -> None:
    """One-line errors for arguments that cannot be a batch (a caller's bug, not a grade)."""
    if len(tasks) != len(completions):
        raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
    for completion in completions:
        if not isinstance(completion, str):  # as env.score says it
            raise TypeError(f"a completion must be a str, got {type(completion).__name__}")


class Threads:
    """``env.score`` of each pair on a pool of ``workers`` threads (graders wait on sandboxes
    and checker processes, so threads overlap them)."""

    def __init__(self, env: Gradable, workers: int = 16, name: str = "grade"):
        self.env = env
        self.workers = workers
        self.name = name

    def score_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[Result]:
        if not tasks:
            return []
        size = max(1, min(self.workers, len(tasks)))
        with ThreadPoolExecutor(size, thread_name_prefix=self.name) as pool:
            return list(pool.map(lambda t, c: grade_one(self.env, t, c), tasks, completions))


def sandbox_pool(env: Any) -> Threads:
    """Threads as many as the env's sandbox has warm containers: a code env's batch path."""
    return Threads(env, workers=max(1, env.sandbox.pool_size), name="grade")


class EnvBatch:
    """The env's own batch path, ``env.grade_many(tasks, completions)``; one by one on threads
    when that path raises (so one broken pair does not take the batch down)."""

    def __init__(self, env: Any, workers: int = 1):
        self.env = env
        self.workers = workers

    def score_many(self, tasks: Sequence[Task | str], completions: Sequence[str]
                   ) -> list[Result]:
        try:
            results = list(self.env.grade_many(list(tasks), list(completions)))
            if len(results) == len(tasks):
                return results
        except Exception:  # noqa: BLE001 - grade one by one to keep the others
            pass
        return Threads(self.env, self.workers).score_many(tasks, completions)


def default_backend(env: Any, workers: int = 1) -> Backend:
    """The env's own batch path where it has one (``grade_many``), else ``workers`` threads
    (default one: a checker that computes under the GIL only slows down with more; the learner
    and TRL ask for 16, which overlap waits). An env's ``grade_many`` that calls
    ``grade_batch`` must name its backend (``sandbox_pool``)."""
    if callable(getattr(env, "grade_many", None)):
        return EnvBatch(env, workers)
    return Threads(env, workers)


def grade_batch(env: Gradable, tasks: Sequence[Task | str], completions: Sequence[str], *,
                backend: Backend | None = None, workers: int = 1) -> list[Result]:
    """``env.score(tasks[i], completions[i])`` for every i, in order, through ``backend``
    (default: ``default_backend``), under the never-raise policy (the module's docstring)."""
    check_batch(tasks, completions)
    if not tasks:
        return []
    chosen = backend if backend is not None else default_backend(env, workers)
    try:
        results = list(chosen.score_many(tasks, completions))
    except Exception as exc:  # noqa: BLE001 - the backend failed as a whole: each pair says so
        error = f"the grading backend failed: {_one_line(exc)}"
        return [(0.0, infra_failure_info(env, t, error)) for t in tasks]
    if len(results) != len(tasks):
        error = f"the grading backend returned {len(results)} results for {len(tasks)} pairs"
        return [(0.0, infra_failure_info(env, t, error)) for t in tasks]
    return results
