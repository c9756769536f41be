"""grpo/MathExact-v0: exact-answer math graded by the symbolic checker."""

from __future__ import annotations

import re
from typing import ClassVar

from envs.base import TaskEnv
from envs.verify import math as math_verify
from envs.verify.verdict import Verdict
from tasks import Task

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*[{\w]")


class MathExactEnv(TaskEnv):
    """Rewards: ``correct`` (the final answer equals the gold) and ``format`` (it is boxed).

    The checker finds a final answer in many styles ("the answer is 7", ``#### 7``, ...).
    ``require_boxed=True`` credits ``correct`` only for an answer given in ``\\boxed{}``, the
    format the prompt asks for: a policy then cannot earn correctness while ignoring it.
    """

    env_id: ClassVar[str] = "grpo/MathExact-v0"
    default_pack: ClassVar[str] = "gsm8k"
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0, "format": 0.1}
    required_fields: ClassVar[tuple[str, ...]] = ("answer",)

    def __init__(self, *args, timeout: float = 5.0, require_boxed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.timeout = timeout
        self.require_boxed = require_boxed

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        verdict = math_verify.verify(str(task["answer"]), completion, timeout=self.timeout)
        if self.require_boxed and verdict.passed and verdict.details.get("source") != "boxed":
            verdict = Verdict.fail("not_boxed", verdict.extracted, **verdict.details)
        rewards = {
            "correct": 1.0 if verdict.passed else 0.0,
            "format": 1.0 if _BOXED.search(completion) else 0.0,
        }
        return rewards, verdict

    def gold_completion(self, task: Task) -> str:
        return f"\\boxed{{{task['answer']}}}"
