"""grpo/ReasoningGym-v0: one reasoning-gym task (``task=NAME``) as a procedural pack."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.domains.reasoning_gym import answer_validity, grading
from envs.domains.reasoning_gym.catalogue import NOT_OFFERED
from envs.domains.reasoning_gym.generator import (
    INSTALL_HINT,
    NOT_TASKS,
    PACK_OWNED,
    ReasoningGymGenerator,
    config_fields,
    level_config,
    level_count,
    rg,
    rg_version,
    task_names,
)
from envs.keywords import (
    FINITE_NUMBER,
    POSITIVE_SECONDS,
    Accepts,
    KeywordError,
    check_keywords,
    mapping_of,
    optional,
)
from envs.verify import math as math_verify
from envs.verify.prompt_echo import without_copied_instructions
from envs.verify.verdict import Verdict
from tasks import PackError, Task
from tasks.boxes import find_boxes
from tasks.pack import Manifest, ProceduralPack

ENV_ID = "grpo/ReasoningGym-v0"
DEFAULT_TASK = "chain_sum"
#: Our grading rules' version: part of every pack_version with reasoning-gym's own.
RULES_VERSION = "1.0.0"
#: The number instruction shows a box as arith's does; a copy of that line is no answer
#: (``without_copied_instructions``).
BOXED = "Give the final answer as a number in \\boxed{{}}, for example: The answer is \\boxed{{42}}."
TAGGED = "Give only the final answer between <answer> and </answer> tags."
#: Golds a task's kind is judged on (every one a number literal: a ``number`` task).
KIND_PROBE = 8


_TEXT = re.compile(r"\\(?:text|mathrm|mbox)\s*\{([^{}]*)\}")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:/\d+)?")


def _plain_number(answer: str, gold: str) -> bool:
    """The boxed answer is a number alone, as the gold is and as the prompt asks: no percent sign
    (unless the gold has one), no name, no word (``0\\text{ lakh}``, ``5\\text{ sisters}``: the
    dataset's own check compares the text), no leading separator; ``\\frac{a}{b}``, spacing and
    ``\\text{5}`` aside."""
    s = _TEXT.sub(r"\1", answer)
    s = re.sub(r"\\[,;:! ]|\s", "", s).replace("\u2212", "-")
    s = re.sub(r"^\\[dt]?frac\{(-?\d+)\}\{(\d+)\}$", r"\1/\2", s)
    if "%" in s and "%" not in gold:
        return False
    return _PLAIN_NUMBER.fullmatch(s.replace("\\%", "").replace("%", "")) is not None


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _other_answer(completion: str, boxed: str) -> bool:
    """Whether an ``<answer>`` block of a number task's completion holds anything but the boxed
    answer (itself, or the box itself: ``<answer>\\boxed{5}</answer>``), spacing aside."""
    def plain(text: str) -> str:
        return re.sub(r"\\[,;:! ]|\s", "", text)
    for block in _ANSWER_TAG.findall(completion):
        inner = find_boxes(block)
        if plain(inner[-1].content if inner else block) != plain(boxed):
            return True
    return False


class MissingExtra(ImportError, PackError):
    """reasoning-gym is not installed (a ``PackError`` too, so the CLIs print it in one line)."""


@lru_cache(maxsize=256)
def _kind(task: str, scorer: bool, generator_key: str, probe: tuple[str | None, ...]) -> str:
    if all(grading.is_number(g) for g in probe):
        return "number"
    return "scorer" if scorer else "exact"


def has_own_scorer(task: str) -> bool:
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS

    return DATASETS[task][0].score_answer is not ProceduralDataset.score_answer


class ReasoningGymEnv(TaskEnv):
    """Rewards: ``correct`` (the one final answer is right under our rules; see
    ``envs.domains.reasoning_gym.grading``). Keywords: ``task`` (a reasoning-gym dataset name),
    ``level`` (1 = easiest, from the task's curriculum; omitted: the generator's defaults),
    ``timeout`` (seconds for the math checker or the task's scorer) and any key of the task's
    config class (``min_terms=2``), checked here against that class."""

    env_id: ClassVar[str] = ENV_ID
    recipe_file: ClassVar[Path | None] = Path(__file__).with_name("reasoning_gym.toml")
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0}
    required_fields: ClassVar[tuple[str, ...]] = ("question",)

    def __init__(self, task: str = DEFAULT_TASK, level: int | None = None, split: str = "train",
                 reward_weights: dict[str, float] | None = None, timeout: float = 5.0,
                 pack: Any = None, python_tool: Any = False, max_turns: int | None = None,
                 **config: Any):
        check_keywords(ENV_ID, task=(task, Accepts("a reasoning-gym task name",
                                                   lambda v: isinstance(v, str))),
                       level=(level, optional(Accepts("a positive integer",
                                                      lambda v: type(v) is int and v >= 1))),
                       timeout=(timeout, POSITIVE_SECONDS),
                       reward_weights=(reward_weights, optional(mapping_of(
                           "component names", FINITE_NUMBER))))
        if task in NOT_OFFERED:
            raise KeywordError(f"{ENV_ID}: task {task!r} is {NOT_OFFERED[task]}")
        if pack is not None:
            raise KeywordError(f"{ENV_ID}: pack takes no pack name or Pack (the pack is "
                               f"task=NAME's), got {pack!r}"[:200])
        try:
            rg()
        except ImportError:
            raise MissingExtra(f"{ENV_ID} needs reasoning-gym: {INSTALL_HINT}") from None
        self.task_name, self.level, self.timeout = task, level, timeout
        self.config = _checked_config(task, level, config)
        try:
            generator = ReasoningGymGenerator(task, level, self.config)
            probe = tuple(generator.entry(i)["answer"] for i in range(KIND_PROBE))
        except (AssertionError, ValueError, TypeError, KeyError) as exc:
            raise KeywordError(f"{ENV_ID}: task {task!r} refuses {_shown(config, level)}: "
                               f"{type(exc).__name__}: {exc}; it takes "
                               f"{', '.join(config_fields(task))}") from None
        probe = tuple(None if g is None else str(g) for g in probe)
        self.kind = _kind(task, has_own_scorer(task), grading.config_key(self.config), probe)
        instruction = BOXED if self.kind == "number" else TAGGED
        manifest = Manifest(
            name=f"rg-{task}", version=f"{RULES_VERSION}-rg{rg_version()}",
            description=f"reasoning-gym's {task}" + (f", level {level}" if level else ""),
            license="Apache-2.0 (generated by reasoning-gym)",
            source=f"reasoning-gym {rg_version()}, dataset {task}", env=ENV_ID,
            prompt_template="{question}\n\n" + instruction,
            splits={"train": None, "test": None},
            generator="envs.domains.reasoning_gym.generator:ReasoningGymGenerator")
        self.scorer_spec: grading.ScorerSpec = ("rg", task, grading.config_key(self.config))
        super().__init__(pack=ProceduralPack(manifest, generator), split=split,
                         reward_weights=reward_weights, python_tool=python_tool,
                         max_turns=max_turns)

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        gold = task["answer"]
        if self.kind == "scorer":
            verdict = grading.grade_scorer(self.scorer_spec, task["rg_entry"], completion,
                                           self.timeout)
        elif gold is None:
            verdict = Verdict.fail("no_gold")
        elif self.kind == "number" and grading.is_number(gold):
            verdict = self._grade_number(task, gold, completion)
        elif self.kind == "number":  # a rare gold that is not a number: the one box, exactly
            boxes = find_boxes(completion)
            if len(boxes) != 1 or not boxes[0].closed or boxes[0].nested:
                verdict = Verdict.fail("no_answer" if not boxes else "several_answers")
            else:
                verdict = grading.grade_exact(gold, f"<answer>{boxes[0].content}</answer>")
        else:
            verdict = grading.grade_exact(gold, completion)
        return {"correct": 1.0 if verdict.passed else 0.0}, verdict

    def _grade_number(self, task: Task, gold: str, completion: str) -> Verdict:
        question = self.pack.prompt(task)
        verdict = math_verify.verify(gold, without_copied_instructions(question, completion),
                                     timeout=self.timeout, answer="number", question=question)
        if verdict.passed and verdict.details.get("source") != "boxed":
            return Verdict.fail("not_boxed", verdict.extracted, **verdict.details)
        boxes = find_boxes(completion)
        if verdict.passed and _other_answer(completion, boxes[-1].content if boxes else ""):
            # The env's other answer format holding something else is a second answer:
            # \boxed{2.0} ... <answer>2.0} 1</answer> (a paid wrong answer the card's reward
            # search found on rectangle_count, whose reference reads the tag).
            return Verdict.fail("several_answers", verdict.extracted, **verdict.details)
        if verdict.passed and not _plain_number(boxes[-1].content if boxes else "", gold):
            # The prompt asks for a number: 5% is not the 5 a count asks for (math's percent
            # reading is for questions about percent), nor is "x = 1" or ", -1" the number alone
            # (paid wrong answers the card's reward search found on aiw, basic_arithmetic and
            # binary_alternation).
            return Verdict.fail("not_a_number", verdict.extracted, **verdict.details)
        return verdict

    def gold_completion(self, task: Task) -> str | None:
        gold = task["answer"]
        if gold is None:
            return None
        return self.answer_in_format(gold)

    def right_answer(self, task: Task, answer: str) -> bool | None:
        """Whether ``answer`` (the answer's text, out of its tag) is right by the task's own
        rules, for a task with several right answers (``answer_validity``); ``None`` for the
        others, whose gold is their one right answer. The card's reference, not the reward."""
        if self.task_name not in answer_validity.CHECKS:
            return None
        return answer_validity.is_right(self.task_name, answer, task["rg_entry"])

    def answer_in_format(self, answer: str) -> str:
        """``answer`` written as the prompt asks: boxed for a number task, else tagged."""
        return f"\\boxed{{{answer}}}" if self.kind == "number" else f"<answer>{answer}</answer>"

    def shallow_completions(self, task: Task) -> dict[str, str]:
        """The generic ones, and the same constants (and the question) in the answer format."""
        shallow = super().shallow_completions(task)
        for name in ("0", "1", "Yes", "No", "True", "False", "None"):
            shallow[f"{name.lower()}_in_format"] = self.answer_in_format(name)
        shallow["question_in_format"] = self.answer_in_format(task["question"])
        return shallow

    def no_signal_hint(self) -> str:
        return "level=1 (the curriculum's easiest), or a bigger model"


def _checked_config(task: str, level: int | None, config: dict[str, Any]) -> dict[str, Any]:
    names = task_names()
    if task not in names:
        close = difflib.get_close_matches(task, names, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        why = " (it combines other tasks)" if task in NOT_TASKS else ""
        raise KeywordError(f"{ENV_ID}: unknown task {task!r}{why}{hint}; `python -m envs list` "
                           f"shows all {len(names)}")
    fields = config_fields(task)
    unknown = sorted(set(config) - set(fields))
    if unknown:
        owned = [k for k in unknown if k in PACK_OWNED]
        why = (f" ({', '.join(owned)}: the pack's own, its train stream is unbounded and its "
               "test set fixed)" if owned else "")
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise KeywordError(f"{ENV_ID}: task {task!r} has no config key "
                           f"{', '.join(map(repr, unknown))}{why}{hint}; it takes task, level, "
                           f"timeout, reward_weights, split and {', '.join(fields)}")
    levels = level_count(task)
    if level is not None and level > max(levels, 0):
        span = f"one of 1..{levels}" if levels else "none (the task has no curriculum)"
        raise KeywordError(f"{ENV_ID}: task {task!r} takes level {span}, got {level}")
    merged = level_config(task, level) if level is not None else {}
    merged.update(config)
    return merged


def _shown(config: dict[str, Any], level: int | None) -> str:
    items = [f"{k}={v!r}" for k, v in config.items()]
    if level is not None:
        items.insert(0, f"level={level}")
    return ", ".join(items) or "its defaults"
