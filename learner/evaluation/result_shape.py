"""One evaluation result per run in the field's shape (``eval.json``): success rate with its
standard error, unbiased pass@k, the infrastructure error rate, per-task rows, and what was
evaluated (env, pack and version, model).

The shape follows the evaluation result of OpenEnv's RFC 013 (in review): ``success_rate`` +-
``success_stderr``, ``pass_at_k``, ``error_rate``, ``tasks`` (one row per task), so that two
runs can be compared task by task (``learner.evaluation.compare``).

Counting, as every accuracy of the learner (``learner.evaluation.infra``): a sample whose grading
failed for infrastructure (a lost sandbox, not a wrong answer) stays in its task's ``n`` and is
never ``correct``; ``errors`` counts it apart from the wrong answers, and ``error_rate`` is
errors / samples. Leaving it out of the denominator would let a policy that can turn its own
grade into such a failure raise its figure. Past ``MAX_INFRA_SHARE`` of the samples the result
gives no success rate or pass@k (null) and ``refused`` says why in one line.

The standard errors treat tasks as the sampling unit (samples of one task are not independent):
the sample standard deviation of the per-task figures over the square root of the task count.
Torch-free: ``compare`` reads these files without loading a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from learner.evaluation.infra import MAX_INFRA_SHARE, InfraCount

RESULT_JSON = "eval.json"
#: What a reader can rely on: bumped when a field changes meaning.
SHAPE = "grpo-gym/eval-result/1"
ERROR_POLICY = ("an infrastructure error stays in its task's n and is never correct (a miss in "
                "success_rate and pass@k); error_rate = errors / samples; past "
                f"{MAX_INFRA_SHARE:.0%} of the samples no success_rate or pass@k is given")
STDERR_METHOD = "over tasks: sample std (ddof 1) of the per-task figure / sqrt(tasks)"


# -- the estimators -------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021):
    ``1 - C(n-c, k) / C(n, k)``, computed as Chen et al.'s numerically stable product
    ``1 - prod_{i=n-c+1}^{n} (1 - k / i)`` (no factorials, so no overflow for large n)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_and_stderr(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean of ``values`` and its standard error ``s / sqrt(m)`` (``s`` with ddof 1);
    None for no values, and no standard error for fewer than two."""
    m = len(values)
    if m == 0:
        return None, None
    mean = math.fsum(values) / m
    if m < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (m - 1)
    return mean, math.sqrt(var / m)


def parse_ks(text: str) -> list[int]:
    """``"1,4,8"`` -> ``[1, 4, 8]`` (sorted, without repeats); ValueError says what is wrong."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--pass-k takes whole numbers separated by commas, like 1,4,8; got "
                         f"{text!r}") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--pass-k takes whole numbers >= 1, like 1,4,8; got {text!r}")
    return ks


def k_problem(ks: Iterable[int], n: int) -> str | None:
    """One line when a k exceeds the samples per task (pass@k needs n >= k), else None."""
    over = [k for k in ks if k > n]
    if not over:
        return None
    return (f"--pass-k {','.join(map(str, over))} needs at least that many samples per task: "
            f"--samples-per-task is {n} (raise it to {max(over)} or drop those k)")


# -- per-task rows and the totals -----------------------------------------------------------
@dataclass(frozen=True)
class TaskRow:
    """One task's samples: how many (``n``), how many passed (``correct``), how many failed
    for infrastructure (``errors``), and the mean reward of the graded ones."""

    task_id: str
    n: int
    correct: int
    errors: int
    reward_mean: float | None

    @property
    def success(self) -> float:
        return self.correct / self.n if self.n else 0.0


def task_rows(samples: Iterable[Mapping[str, Any]]) -> list[TaskRow]:
    """Per-task rows from graded samples (``task_id``, ``passed``, ``reward``, ``infra_error``),
    in the order tasks first appear. An infrastructure failure is never correct."""
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for s in samples:
        by_task.setdefault(str(s["task_id"]), []).append(s)
    rows = []
    for task_id, group in by_task.items():
        graded = [s for s in group if not s.get("infra_error")]
        rewards = [float(s["reward"]) for s in graded]
        rows.append(TaskRow(
            task_id=task_id, n=len(group), correct=sum(bool(s["passed"]) for s in graded),
            errors=len(group) - len(graded),
            reward_mean=math.fsum(rewards) / len(rewards) if rewards else None))
    return rows


def build_result(rows: Sequence[TaskRow], ks: Sequence[int], *, env: str, pack: str | None,
                 pack_version: str | None, model: Mapping[str, Any],
                 sampling: Mapping[str, Any] | None = None,
                 extra: Mapping[str, Any] | None = None,
                 first_error: str | None = None) -> dict[str, Any]:
    """The ``eval.json`` object for ``rows`` (one per task, each with at least max(ks)
    samples). ``model``: name, path, revision, weights key (``model_identity``);
    ``sampling``: how the samples were drawn; ``extra``: anything else worth keeping."""
    if rows and (short := [r.task_id for r in rows if r.n < max(ks)]):
        raise ValueError(f"pass@{max(ks)} needs at least {max(ks)} samples per task; "
                         f"{len(short)} task(s) have fewer (first: {short[0]})")
    samples = sum(r.n for r in rows)
    correct = sum(r.correct for r in rows)
    errors = sum(r.errors for r in rows)
    count = InfraCount(samples, errors, first_error)
    refused = count.refusal("success rate") if rows else "no tasks were evaluated"
    success, stderr = mean_and_stderr([r.success for r in rows])
    passk: dict[str, float | None] = {}
    passk_stderr: dict[str, float | None] = {}
    for k in ks:
        per_task = [pass_at_k(r.n, r.correct, k) for r in rows]
        passk[f"pass@{k}"], passk_stderr[f"pass@{k}"] = mean_and_stderr(per_task)
    if refused:
        success = stderr = None
        passk = dict.fromkeys(passk)
        passk_stderr = dict.fromkeys(passk_stderr)
    return {
        "shape": SHAPE,
        "env": env,
        "pack": pack,
        "pack_version": pack_version,
        "model": dict(model),
        "sampling": dict(sampling or {}),
        "n_tasks": len(rows),
        "samples": samples,
        "correct": correct,
        "wrong": samples - correct - errors,
        "errors": errors,
        "success_rate": success,
        "success_stderr": stderr,
        "pass_at_k": passk,
        "pass_at_k_stderr": passk_stderr,
        "error_rate": errors / samples if samples else None,
        "first_error": first_error,
        "refused": refused,
        "error_policy": ERROR_POLICY,
        "stderr_method": STDERR_METHOD,
        "pass_at_k_estimator": "unbiased, 1 - C(n-c,k)/C(n,k) per task (Chen et al. 2021), "
                               "averaged over tasks",
        **dict(extra or {}),
        "tasks": [asdict(r) for r in rows],
    }


def result_from_samples(samples: Sequence[Mapping[str, Any]], ks: Sequence[int],
                        **kwargs: Any) -> dict[str, Any]:
    """``build_result`` over the per-task rows of ``samples`` (each a graded completion)."""
    first_error = next((s.get("infra_reason") for s in samples
                        if s.get("infra_error") and s.get("infra_reason")), None)
    return build_result(task_rows(samples), ks, first_error=first_error, **kwargs)


def summary_line(result: Mapping[str, Any]) -> str:
    """``success 0.141 +- 0.051 over 16 tasks x 4 samples, pass@4 0.375, error rate 0.000``,
    or the refusal."""
    if result.get("refused"):
        return str(result["refused"])
    se = result.get("success_stderr")
    n = (result.get("sampling") or {}).get("samples_per_task")
    parts = [f"success {result['success_rate']:.3f}" + (f" +- {se:.3f}" if se is not None
                                                         else "")
             + f" over {result['n_tasks']} tasks" + (f" x {n} samples" if n else "")]
    parts += [f"{k} {v:.3f}" for k, v in result.get("pass_at_k", {}).items()
              if k != "pass@1" and v is not None]
    parts.append(f"error rate {result.get('error_rate') or 0:.3f}")
    return ", ".join(parts)


# -- the model's identity -------------------------------------------------------------------
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
_SAMPLE = 1 << 20


def weights_key(folder: str | Path) -> str | None:
    """A key of a model folder's weight files (names, sizes and each file's first and last
    MiB, sha256, 12 hex digits): cheap on a large model, and different for other weights.
    None when the folder holds no weight file."""
    import hashlib

    folder = Path(folder)
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder)}:{size}\n".encode())
        with path.open("rb") as fh:
            digest.update(fh.read(_SAMPLE))
            fh.seek(max(0, size - _SAMPLE))
            digest.update(fh.read(_SAMPLE))
    return digest.hexdigest()[:12]


def model_identity(name: str, path: str | None = None, revision: str | None = None
                   ) -> dict[str, Any]:
    """``{"name", "path", "revision", "weights_key"}``: what was evaluated. ``revision`` is
    the hub's commit where the model came from the hub; ``weights_key`` (``weights_key``)
    tells apart two local folders of one name."""
    return {"name": name, "path": path, "revision": revision,
            "weights_key": weights_key(path) if path else None}


# -- reading and writing --------------------------------------------------------------------
class ResultError(RuntimeError):
    """No readable evaluation result where one was asked for; the message says where and why."""


def write_result(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``result`` to ``path`` (a folder gets ``eval.json``)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_JSON
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def load_result(path: str | Path) -> dict[str, Any]:
    """An evaluation result from its file or the folder holding ``eval.json``."""
    path = Path(path)
    if path.is_dir() or path.suffix != ".json":
        path = path / RESULT_JSON
    if not path.is_file():
        raise ResultError(f"no evaluation result at {path}: write one with python -m "
                          f"learner.eval --output-dir {path.parent}")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultError(f"{path} is not a readable evaluation result: {exc}") from exc
    if not isinstance(result, dict) or not isinstance(result.get("tasks"), list):
        raise ResultError(f"{path} is not an evaluation result: no per-task rows ('tasks')")
    for row in result["tasks"]:
        if not (isinstance(row, dict) and isinstance(row.get("task_id"), str)
                and all(isinstance(row.get(f), int) and not isinstance(row.get(f), bool)
                        for f in ("n", "correct", "errors"))
                and row["n"] >= 1 and 0 <= row["errors"] <= row["n"]
                and 0 <= row["correct"] <= row["n"] - row["errors"]):
            raise ResultError(f"{path} has a malformed task row: {json.dumps(row)[:120]}")
    return result
