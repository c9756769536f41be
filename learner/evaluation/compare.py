"""Two evaluation results compared task by task: the difference in success rate with a paired
standard error, its z value, and whether it is significant at 95%.

Pairing by task id removes the between-task variance that both runs share (an easy task is easy
for both): over the ``m`` shared tasks, ``d_i = success_B(i) - success_A(i)``, the difference is
``mean(d)`` and its standard error ``std(d, ddof 1) / sqrt(m)`` (Miller 2024, "Adding error bars
to evals", section 4). ``z = difference / stderr``; ``|z| > 1.96`` is significant at 95%
(two-sided, normal approximation). Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learner.evaluation.result_shape import ResultError, load_result, mean_and_stderr

#: Two-sided 95% critical value of the standard normal.
Z_95 = 1.959963984540054


class CompareError(ResultError):
    """The two results cannot be compared (no shared task, too few, a refused figure)."""


@dataclass(frozen=True)
class Comparison:
    shared: int
    only_a: int
    only_b: int
    success_a: float
    success_b: float
    diff: float
    stderr: float
    z: float

    @property
    def significant(self) -> bool:
        return abs(self.z) > Z_95

    def as_dict(self) -> dict[str, Any]:
        return {"shared_tasks": self.shared, "only_a": self.only_a, "only_b": self.only_b,
                "success_a": self.success_a, "success_b": self.success_b, "diff": self.diff,
                "stderr": self.stderr, "z": self.z, "significant_95": self.significant}


def _per_task(result: Mapping[str, Any]) -> dict[str, float]:
    """task id -> success (correct / n; an infrastructure error a miss, as ``result_shape``)."""
    return {row["task_id"]: row["correct"] / row["n"] for row in result["tasks"]}


def paired_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """B minus A over the tasks both results hold, paired by task id."""
    for label, result in (("A", a), ("B", b)):
        if result.get("refused"):
            raise CompareError(f"{label} has no success rate to compare: {result['refused']}")
    pa, pb = _per_task(a), _per_task(b)
    shared = [t for t in pa if t in pb]
    if not shared:
        raise CompareError(f"the two results share no task id (A has {len(pa)}, B has "
                           f"{len(pb)}): evaluate both on the same env, pack and split")
    if len(shared) < 2:
        raise CompareError("the two results share one task id: a paired standard error needs "
                           "at least two")
    diffs = [pb[t] - pa[t] for t in shared]
    diff, stderr = mean_and_stderr(diffs)
    assert diff is not None and stderr is not None  # two or more shared tasks
    # stderr 0: every task moved by exactly the same amount, no spread to weigh it against.
    z = diff / stderr if stderr > 0 else 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return Comparison(
        shared=len(shared), only_a=len(pa) - len(shared), only_b=len(pb) - len(shared),
        success_a=math.fsum(pa[t] for t in shared) / len(shared),
        success_b=math.fsum(pb[t] for t in shared) / len(shared),
        diff=diff, stderr=stderr, z=z)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between the two evaluations besides the model: said, not refused."""
    notes = []
    for field in ("env", "pack", "pack_version"):
        if a.get(field) != b.get(field):
            notes.append(f"{field}: {a.get(field)} vs {b.get(field)}")
    sa, sb = a.get("sampling") or {}, b.get("sampling") or {}
    for key in sorted(set(sa) | set(sb)):
        if sa.get(key) != sb.get(key):
            notes.append(f"{key}: {sa.get(key)} vs {sb.get(key)}")
    return notes


def compare_lines(path_a: str | Path, path_b: str | Path) -> list[str]:
    """The comparison as printed; raises ``ResultError`` (one line) when it cannot be made."""
    a, b = load_result(path_a), load_result(path_b)
    c = paired_difference(a, b)
    lines = []
    for label, path, result in (("A", path_a, a), ("B", path_b, b)):
        se = result.get("success_stderr")
        lines.append(f"{label}: {path}  {result.get('model', {}).get('name')}  success "
                     f"{result['success_rate']:.3f}"
                     + (f" +- {se:.3f}" if se is not None else "")
                     + f" ({result['n_tasks']} tasks, error rate "
                     f"{result.get('error_rate') or 0:.3f})")
    lines.append(f"shared tasks: {c.shared} (only in A: {c.only_a}, only in B: {c.only_b}); "
                 f"on them A {c.success_a:.3f}, B {c.success_b:.3f}")
    verdict = "significant" if c.significant else "not significant"
    lines.append(f"B - A: {c.diff:+.3f} +- {c.stderr:.3f} (paired standard error over "
                 f"{c.shared} tasks), z = {c.z:+.2f}: {verdict} at 95% (needs |z| > 1.96)")
    if notes := _differences(a, b):
        lines.append("note: the evaluations differ in " + "; ".join(notes))
    return lines
