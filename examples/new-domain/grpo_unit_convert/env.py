"""unitconv/Convert-v0: convert a quantity to another unit; graded with a relative tolerance.

A task record holds ``answer`` (the exact value in the target unit), ``unit`` (the target
unit's symbol) and optionally ``rel_tol`` (default 1e-3, so a sensibly rounded answer passes).
The completion ends with a line ``Answer: <number> <unit>``.
"""

from __future__ import annotations

import math
import re
from typing import ClassVar

from envs.base import TaskEnv
from envs.perturb import GENERIC, Perturbation
from envs.verify.verdict import Verdict
from tasks import Pack, Task

ENV_ID = "unitconv/Convert-v0"
DEFAULT_REL_TOL = 1e-3
_ANSWER = re.compile(
    r"^\s*answer\s*[:=]\s*([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*(.*?)\s*\.?\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def _plain_question(pack: Pack, task: Task) -> str:
    """The conversion asked in one sentence, with no answer-line format."""
    return f"How much is {task['quantity']} in {task['target']}? Give the number in {task['unit']}."


class UnitConvertEnv(TaskEnv):
    """Rewards: ``correct`` (the number is within ``rel_tol`` of the answer) and ``format``
    (the answer line names the target unit)."""

    env_id: ClassVar[str] = ENV_ID
    default_pack: ClassVar[str] = "unit-conversion"
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0, "format": 0.1}
    required_fields: ClassVar[tuple[str, ...]] = ("answer", "unit")
    # The evaluation gates' hooks: ``correct`` does not depend on the answer's format (the
    # default, every component but ``format``, says the same), and one domain perturbation on
    # top of the generic ones.
    check_components: ClassVar[tuple[str, ...]] = ("correct",)
    perturbation_kinds: ClassVar[tuple[Perturbation, ...]] = (
        *GENERIC, Perturbation("plain_question", "one sentence, no Answer: line", _plain_question))

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        found = _ANSWER.findall(completion)
        if not found:
            return {"correct": 0.0, "format": 0.0}, Verdict.fail("no_answer")
        number, unit = found[-1]  # the last answer line is the final one
        try:
            value = float(number.replace(",", ""))
        except ValueError:
            return {"correct": 0.0, "format": 0.0}, Verdict.fail("unparseable", number)
        gold = float(task["answer"])
        rel_tol = float(task.fields.get("rel_tol", DEFAULT_REL_TOL))
        # abs_tol keeps a gold of exactly 0 reachable (a relative tolerance of 0 is exact).
        correct = math.isfinite(value) and math.isclose(value, gold, rel_tol=rel_tol,
                                                        abs_tol=1e-12)
        rewards = {"correct": float(correct), "format": float(unit == task["unit"])}
        verdict = (Verdict.ok("equal", value, unit=unit) if correct
                   else Verdict.fail("not_equal", value, unit=unit))
        return rewards, verdict

    def gold_completion(self, task: Task) -> str:
        return f"Answer: {task['answer']} {task['unit']}"


def register() -> None:
    """The ``grpo_gym.envs`` entry point: ``import envs`` calls it."""
    from envs.registration import register as register_env

    register_env(ENV_ID, f"{__name__}:UnitConvertEnv")
