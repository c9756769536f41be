"""Prompt perturbations per domain: the held-out tasks asked outside the training format.

Each perturbation rebuilds the prompt from the task's fields and the pack's ``prompt_template``.
The template is read as paragraphs (split at blank lines): a paragraph with a ``{field}`` carries
the task, one without is the pack's instruction (answer format, fences, ...). A perturbation keeps
the task paragraphs and replaces or drops the instruction, or changes the fields themselves
(numbers in words, a compact schema). Scoring uses the env's format-independent component
(``CHECKS``), so a skill that only works in the training format shows up as a drop.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envs.base import TaskEnv
from tasks import Pack, Task

#: Built-in env id -> domain; third-party envs are recognised by their reward components.
DOMAIN_BY_ENV = {
    "grpo/MathExact-v0": "math",
    "grpo/CodeTests-v0": "code",
    "grpo/JsonSchema-v0": "json",
}
_DOMAIN_BY_COMPONENT = {"correct": "math", "tests": "code", "valid": "json"}

#: Domain -> the reward components that do not depend on the answer's format (first = headline).
CHECKS = {
    "math": ("correct",),
    "code": ("tests",),
    "json": ("content", "valid"),
}


def domain_of(env: TaskEnv) -> str | None:
    """``math``, ``code``, ``json`` or None for an env this module knows nothing about."""
    if env.env_id in DOMAIN_BY_ENV:
        return DOMAIN_BY_ENV[env.env_id]
    return next((d for c, d in _DOMAIN_BY_COMPONENT.items() if c in env.default_weights), None)


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


def _with_instruction(instruction: str, unfenced: bool = False) -> Callable[[Pack, Task], str]:
    def build(pack: Pack, task: Task) -> str:
        return task_body(pack, task, unfenced=unfenced) + "\n\n" + instruction
    return build


def _with_fields(rewrite: Callable[[str, Any], Any]) -> Callable[[Pack, Task], str]:
    """The pack's own prompt, with each template field's value passed through ``rewrite``."""
    def build(pack: Pack, task: Task) -> str:
        fields = dict(task.fields)
        for name in template_fields(pack):
            if name in fields:
                fields[name] = rewrite(name, fields[name])
        return pack.prompt(Task(task.id, task.split, fields))
    return build


def _irrelevant_context(pack: Pack, task: Task) -> str:
    return irrelevant_sentence(task) + "\n\n" + pack.prompt(task)


def _body_only(pack: Pack, task: Task) -> str:
    return task_body(pack, task)


def _spelled(name: str, value: Any) -> Any:
    return spell_small_numbers(value) if isinstance(value, str) else value


def _compact_schema(pack: Pack, task: Task) -> str:
    def rewrite(name: str, value: Any) -> Any:
        if name == "schema_text" and "schema" in task.fields:
            return json.dumps(task["schema"], separators=(",", ":"), ensure_ascii=False)
        return value
    return _with_fields(rewrite)(pack, task)


_IRRELEVANT = Perturbation("irrelevant_context", "an unrelated sentence before the task",
                           _irrelevant_context)

PERTURBATIONS: dict[str, tuple[Perturbation, ...]] = {
    "math": (
        Perturbation("paraphrase", "the instruction reworded, still asking for \\boxed{}",
                     _with_instruction("Work this out step by step. When you are done, write the "
                                       "result inside \\boxed{}.")),
        Perturbation("final_answer_line", "asks for a last line 'Final answer: N' instead of "
                     "\\boxed{}", _with_instruction("Explain your reasoning, then finish with a "
                                                    "line of the form 'Final answer: N'.")),
        Perturbation("no_instruction", "the question alone, no format requested", _body_only),
        _IRRELEVANT,
        Perturbation("numbers_in_words", "integers below 100 written in words",
                     _with_fields(_spelled)),
    ),
    "code": (
        Perturbation("paraphrase", "the instruction reworded, still asking for a fenced block",
                     _with_instruction("Implement this in Python. Give the whole function, with "
                                       "any imports it uses, in a ```python block.")),
        Perturbation("no_fences", "no fences in the prompt; asks for plain code without them",
                     _with_instruction("Reply with only the complete Python code as plain text, "
                                       "without Markdown code fences or explanations.",
                                       unfenced=True)),
        _IRRELEVANT,
    ),
    "json": (
        Perturbation("paraphrase", "the instruction reworded",
                     _with_instruction("Answer with one JSON object and nothing else.")),
        Perturbation("compact_schema", "the schema shown as compact one-line JSON",
                     _compact_schema),
        _IRRELEVANT,
    ),
}


def perturbations_for(env: TaskEnv) -> tuple[Perturbation, ...]:
    """The perturbations that apply to ``env`` (none for an unknown domain)."""
    return PERTURBATIONS.get(domain_of(env) or "", ())


def check_components(env: TaskEnv) -> tuple[str, ...]:
    """The format-independent reward components of ``env`` (headline first)."""
    domain = domain_of(env)
    if domain in CHECKS:
        return CHECKS[domain]
    return (next(iter(env.default_weights)),) if env.default_weights else ()
