"""Prompt perturbations: a task asked outside the pack's training format.

Each perturbation rebuilds the prompt from the task's fields and the pack's ``prompt_template``.
The template is read as paragraphs (split at blank lines): a paragraph with a ``{field}`` carries
the task, one without is the pack's instruction (answer format, fences, ...). A perturbation keeps
the task paragraphs and replaces or drops the instruction, or changes the fields themselves.

``GENERIC`` works for any pack (``TaskEnv.perturbation_kinds`` by default); an env adds its
domain's own (numbers in words for math, no fences for code, a compact schema for JSON). The
learner scores them with the env's ``check_components``, so a skill that only works in the
training format shows up as a drop.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tasks import Pack, Task


# -- reading the template -------------------------------------------------------------------
def _fields_in(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def template_parts(template: str) -> list[tuple[str, bool]]:
    """The template's paragraphs, each with whether it holds a task field (else: instruction)."""
    return [(p, bool(_fields_in(p))) for p in re.split(r"\n\s*\n", template.strip())]


_TEMPLATE_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?|\n?```[ \t]*$", re.MULTILINE)


def task_body(pack: Pack, task: Task, *, unfenced: bool = False) -> str:
    """The prompt without the pack's instruction paragraphs (``unfenced``: also without the
    Markdown fences the template puts around a field)."""
    parts = [p for p, has_fields in template_parts(pack.manifest.prompt_template) if has_fields]
    if unfenced:
        parts = [_TEMPLATE_FENCE.sub("", p) for p in parts]
    return "\n\n".join(p.format_map(task.fields).strip("\n") for p in parts)


def template_fields(pack: Pack) -> list[str]:
    return _fields_in(pack.manifest.prompt_template)


# -- field rewrites -------------------------------------------------------------------------
_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
# A standalone integer: not part of a decimal, a thousands group, an amount, a time or a name.
_SMALL_INT = re.compile(r"(?<![\w.,$^/:])(\d{1,2})(?![\w%:]|[.,/]\d)")


def number_words(n: int) -> str:
    """English words for 0..99."""
    if not 0 <= n < 100:
        raise ValueError(f"only 0..99 are spelled out, got {n}")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + ("" if ones == 0 else "-" + _ONES[ones])


def spell_small_numbers(text: str) -> str:
    """Write the standalone integers below 100 of ``text`` in words."""
    return _SMALL_INT.sub(lambda m: number_words(int(m.group(1))), text)


IRRELEVANT_SENTENCES = (
    "The library on Elm Street reopened last spring after a long renovation.",
    "Maria's cousin has been learning to play the violin for two years.",
    "It rained heavily in the morning, but the afternoon was sunny.",
    "The old bridge over the river was painted green in 1998.",
)


def irrelevant_sentence(task: Task) -> str:
    """A distractor chosen by the task id, so every run shows the same one for a task."""
    index = hashlib.sha256(task.id.encode()).digest()[0] % len(IRRELEVANT_SENTENCES)
    return IRRELEVANT_SENTENCES[index]


# -- the perturbations ----------------------------------------------------------------------
@dataclass(frozen=True)
class Perturbation:
    name: str
    description: str
    build: Callable[[Pack, Task], str]

    def __call__(self, pack: Pack, task: Task) -> str:
        return self.build(pack, task)


def with_instruction(instruction: str, unfenced: bool = False) -> Callable[[Pack, Task], str]:
    def build(pack: Pack, task: Task) -> str:
        return task_body(pack, task, unfenced=unfenced) + "\n\n" + instruction
    return build


def with_fields(rewrite: Callable[[str, Any], Any]) -> Callable[[Pack, Task], str]:
    """The pack's own prompt, with each template field's value passed through ``rewrite``."""
    def build(pack: Pack, task: Task) -> str:
        fields = dict(task.fields)
        for name in template_fields(pack):
            if name in fields:
                fields[name] = rewrite(name, fields[name])
        return pack.prompt(Task(task.id, task.split, fields))
    return build


def irrelevant_context(pack: Pack, task: Task) -> str:
    return irrelevant_sentence(task) + "\n\n" + pack.prompt(task)


def body_only(pack: Pack, task: Task) -> str:
    return task_body(pack, task)


def spelled_numbers(name: str, value: Any) -> Any:
    return spell_small_numbers(value) if isinstance(value, str) else value


def _reworded_instruction(pack: Pack, task: Task) -> str:
    instructions = [p for p, has_fields in template_parts(pack.manifest.prompt_template)
                    if not has_fields]
    body = task_body(pack, task)
    if not instructions:
        return "Please solve the following.\n\n" + body
    text = " ".join(p.format_map(task.fields).strip() for p in instructions)
    return body + "\n\nPlease follow this instruction: " + text[:1].lower() + text[1:]


PARAPHRASE = Perturbation("paraphrase", "the pack's instruction reworded as a request",
                          _reworded_instruction)
NO_INSTRUCTION = Perturbation("no_instruction", "the task alone, no instruction", body_only)
IRRELEVANT = Perturbation("irrelevant_context", "an unrelated sentence before the task",
                          irrelevant_context)
#: Perturbations that need nothing but the pack's template: every env's default.
GENERIC: tuple[Perturbation, ...] = (PARAPHRASE, NO_INSTRUCTION, IRRELEVANT)
