"""grpo/MathExact-v0: exact-answer math graded by the symbolic checker."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.flags import MIN_REASONING_WORDS, Flag, answer_flags
from envs.keywords import FLAG, POSITIVE_SECONDS, check_keywords
from envs.perturb import (
    IRRELEVANT,
    NO_INSTRUCTION,
    Perturbation,
    spelled_numbers,
    with_fields,
    with_instruction,
)
from envs.verify import math as math_verify
from envs.verify.math_answer import ANSWER_TYPES, restated_expression
from envs.verify.math_extract import extract
from envs.verify.prompt_echo import without_copied_instructions
from envs.verify.verdict import Verdict
from tasks import PackError, Task
from tasks.boxes import find_boxes

DEFAULT_ANSWER = "expression"
# An operation in a pack's written-out computation (arith's ``expression``: ``7 * 46``).
_OPERATION = re.compile(r"[-+*/×÷]")

#: The question asked outside the training format: another answer style, no instruction, an
#: unrelated sentence, numbers in words.
MATH_PERTURBATIONS = (
    Perturbation("paraphrase", "the instruction reworded, still asking for \\boxed{}",
                 with_instruction("Work this out step by step. When you are done, write the "
                                  "result inside \\boxed{}.")),
    Perturbation("final_answer_line", "asks for a last line 'Final answer: N' instead of "
                 "\\boxed{}", with_instruction("Explain your reasoning, then finish with a line "
                                               "of the form 'Final answer: N'.")),
    NO_INSTRUCTION,
    IRRELEVANT,
    Perturbation("numbers_in_words", "integers below 100 written in words",
                 with_fields(spelled_numbers)),
)


class MathExactEnv(TaskEnv):
    """Rewards: ``correct`` (the final answer equals the gold) and ``format`` (the final answer is
    in one well-formed ``\\boxed{}``: closed, not nested, the last thing the completion states).

    What an answer may be comes from the pack's ``answer`` key (``pack.toml``): ``"number"``
    credits only number literals (``arith``, ``gsm8k``); ``"expression"`` (the default for a pack
    that does not say; ``math``, ``math500``) credits any form with the gold's value. Either way
    an answer that restates the question's computation (``\\boxed{6 + 2}`` for "What is 2 + 6?")
    is not credited (reason ``restates_question``), and a box inside a box (or an unclosed one) is
    ``malformed_box``.

    The checker finds a final answer in many styles ("the answer is 7", ``#### 7``, ...).
    ``require_boxed=True`` credits ``correct`` only for an answer given in ``\\boxed{}``, the
    format the prompt asks for: a policy then cannot earn correctness while ignoring it. The
    ``format`` component uses the same test, so the two never disagree.
    ``decimal_rounding=True`` accepts a correctly rounded decimal for a value with no finite
    decimal form (0.33 for 1/3); by default a decimal must be exact.
    """

    env_id: ClassVar[str] = "grpo/MathExact-v0"
    recipe_file: ClassVar[Path | None] = Path(__file__).with_name("math_exact.toml")
    default_pack: ClassVar[str] = "gsm8k"
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0, "format": 0.1}
    required_fields: ClassVar[tuple[str, ...]] = ("answer",)
    perturbation_kinds: ClassVar[tuple[Perturbation, ...]] = MATH_PERTURBATIONS

    def no_signal_hint(self) -> str:
        # arith is procedural: level 1 is the easiest task any math pack has.
        if self.pack.name == "arith":
            return "level=1 (the easiest sums), or a bigger model"
        return "pack=arith level=1 (the easiest sums), or a bigger model"

    def curriculum_key(self, task: Task) -> str | None:
        # MATH's records carry their subject (algebra, geometry, ...): the curriculum's key.
        subject = task.fields.get("subject")
        return str(subject) if subject else super().curriculum_key(task)

    def __init__(self, *args: Any, timeout: float = 5.0, require_boxed: bool = False,
                 decimal_rounding: bool = False, **kwargs: Any):
        check_keywords(self.env_id, timeout=(timeout, POSITIVE_SECONDS),
                       require_boxed=(require_boxed, FLAG),
                       decimal_rounding=(decimal_rounding, FLAG))
        super().__init__(*args, **kwargs)
        self.timeout = timeout
        self.require_boxed = require_boxed
        self.decimal_rounding = decimal_rounding
        self.answer_type = self.pack.manifest.answer or DEFAULT_ANSWER
        if self.answer_type not in ANSWER_TYPES:
            raise PackError(f"pack '{self.pack.name}': answer = {self.answer_type!r} is not an "
                            f"answer type of {self.env_id} (one of {', '.join(ANSWER_TYPES)})")

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        question = self.pack.prompt(task)
        verdict = math_verify.verify(
            str(task["answer"]), without_copied_instructions(question, completion),
            timeout=self.timeout, answer=self.answer_type, question=question,
            decimal_rounding=self.decimal_rounding)
        boxed = verdict.details.get("source") == "boxed" and verdict.reason != "malformed_box"
        if self.require_boxed and verdict.passed and not boxed:
            verdict = Verdict.fail("not_boxed", verdict.extracted, **verdict.details)
        rewards = {
            "correct": 1.0 if verdict.passed else 0.0,
            "format": 1.0 if boxed else 0.0,
        }
        return rewards, verdict

    def flag(self, task: Task | str, completion: str, verdict: Verdict | None = None, *,
             truncated: bool = False, typical_chars: float | None = None) -> list[Flag]:
        """The generic flags, told what the task calls for. A bare answer to a one-step
        computation ("What is 4 + 4?" -> ``\\boxed{8}``) is all the task asks, so
        ``no_reasoning`` is kept for tasks of more steps. An answer that restates the question's
        computation is ``restates_question`` whatever the grade: a lenient grader (another
        checker, a changed rule) may pay for it, and the monitor should see that. A completion cut
        at the token budget after its closed final box is not ``long`` for the cut (an honest
        model that rambles on after answering); one cut before it, or padded, still is."""
        if isinstance(task, str):
            task = self.pack.get(task)
        words = 0 if self.working_steps(task) == 1 else MIN_REASONING_WORDS
        if truncated and self.boxed_before_cut(completion):
            # The token budget cut only what followed a closed final box, which grading never
            # reads: "long" still fires at LONG_FACTOR x the median length, not for the cut.
            truncated = False
        flags = answer_flags(completion, truncated=truncated, typical_chars=typical_chars,
                             min_reasoning_words=words)
        restated = self.restated(task, completion)
        if restated is not None:
            flags.append(Flag("restates_question", f"the answer restates {restated!r}"))
        return flags

    @staticmethod
    def boxed_before_cut(completion: str) -> bool:
        """The completion's final answer is a closed, well-formed box (so a cut at the token
        budget came after it)."""
        found = extract(completion)
        return found is not None and found.source == "boxed" and not found.malformed_box

    def working_steps(self, task: Task) -> int | None:
        """The operations the task's computation takes, where the pack writes it out (arith's
        ``expression``: ``4 + 4`` is one, ``12 + 7 * 8 - 5`` three); ``None`` when it does not
        (a word problem), and then the generic rules apply."""
        expression = task.fields.get("expression")
        return len(_OPERATION.findall(expression)) if isinstance(expression, str) else None

    def restated(self, task: Task, completion: str) -> str | None:
        """The question's computation that the completion's final answer restates, or None."""
        found = extract(completion)
        if found is None or found.malformed_box:
            return None
        question, gold = self.pack.prompt(task), str(task["answer"])
        for answer in found.answer:
            restated = restated_expression(answer, question, gold)
            if restated is not None:
                return restated
        return None

    def final_answer_given(self, text: str) -> bool:
        """A ``\\boxed{}`` (well formed or not) is a final answer: with the Python tool, a turn
        that boxes an answer before a ```python block is graded, and the block never runs."""
        return bool(find_boxes(text))

    def gold_completion(self, task: Task) -> str:
        return f"\\boxed{{{task['answer']}}}"

    def gold_problem(self, task: Task) -> str | None:
        """Why the task's gold is not a well-formed answer of the pack's type (``None`` if it
        is): a ``number`` pack's gold must be a number literal, and every gold must parse."""
        return math_verify.gold_problem(str(task["answer"]), answer=self.answer_type,
                                        timeout=max(self.timeout, 10.0))
