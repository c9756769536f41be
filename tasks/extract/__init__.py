"""Procedural structured extraction: prose about a record in, the record as schema-valid JSON out.

Five families (people, orders, events, products, addresses; see ``tasks.extract.families``) in
four levels (``level=`` pack option, omitted means all mixed); ``family=`` narrows to one.
Each record holds the JSON Schema, the prose and the generated record as ``expected``.

``example=True`` adds a line to the prompt showing another record of the same family and level
as compact JSON (``example``; empty without the option, so those prompts are unchanged): a small
model that echoes the schema sees what an instance looks like. It is drawn from its own seed, so
the tasks, their ids and the splits are those of the option-less pack, and it shares no value
with the task's record, so copying it earns no content (it is schema-valid, but validity and
form pay only beside content, so a copy earns nothing at all; ``envs.verify.json``).

Train ids ``L<level>-<index>`` are unbounded; the test split is fixed (``TEST_SIZE`` per level
and family). The two never share a task: every text is assigned to one split by a stable hash.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tasks.extract.families import FAMILIES
from tasks.procedural import HashSplitGenerator, check_level, seeded_rng

LEVELS = range(1, 5)
TEST_SIZE = 20  # per level and family
EXAMPLE_ATTEMPTS = 1000  # draws per task to find an example sharing no value with its record


def _build(family: str, level: int, rng: random.Random) -> tuple[dict, dict, str]:
    _, build = FAMILIES[family]
    schema, record, sentences = build(rng, level)
    if level >= 3:  # later sentences in any order: the model must not rely on field order
        rest = sentences[1:]
        rng.shuffle(rest)
        sentences = sentences[:1] + rest
    return schema, record, " ".join(sentences)


def _values(value: Any, path: tuple[Any, ...] = ()) -> set[tuple[tuple[Any, ...], str, Any]]:
    """Every scalar of ``value`` with its path, as content is scored (per leaf): an array of
    objects by position, an array of strings (always a ``uniqueItems`` set here) in any order.
    The type name keeps ``True`` apart from 1."""
    if isinstance(value, dict):
        return set().union(*(_values(v, (*path, k)) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_values(v, (*path, i) if isinstance(v, dict) else path)
                             for i, v in enumerate(value)))
    return {(path, type(value).__name__, value)}


def example_record(family: str, level: int, record: dict[str, Any], key: str) -> dict[str, Any]:
    """Another record of ``family`` at ``level`` that shares no value with ``record`` at the same
    place: shown in the prompt, it must not be a right answer, even in part. Seeded by the
    task's ``key`` (its text) on a stream of its own, so the tasks' draws are untouched."""
    _, build = FAMILIES[family]
    taken = _values(record)
    for attempt in range(EXAMPLE_ATTEMPTS):
        _, other, _ = build(seeded_rng("extract-example", family, level, key, attempt), level)
        if not _values(other) & taken:
            return other
    raise RuntimeError(f"no example for a {family} record of level {level} shares no value "
                       f"with it in {EXAMPLE_ATTEMPTS} draws")


class ExtractGenerator(HashSplitGenerator):
    """The ``generator`` of the ``extract`` pack (see ``tasks.pack.Generator``)."""

    name = "extract"
    test_size = TEST_SIZE
    test_percent = 20
    test_attempts = TEST_SIZE * 50
    combo_names = ("level", "family")

    def __init__(self, level: int | None = None, family: str | None = None,
                 example: bool = False):
        check_level(level, LEVELS)
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)} or omitted, "
                             f"got {family!r}")
        # A string such as "false" from a command line would be truthy: only a bool is taken.
        if type(example) is not bool:
            raise ValueError(f"example must be true or false, got {example!r}")
        self.level = level
        self.family = family
        self.example = example
        levels = [level] if level else list(LEVELS)
        families = [family] if family else list(FAMILIES)
        self.combos = [(lv, fam) for lv in levels for fam in families]

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        level, family = combo
        schema, record, text = _build(family, level, rng)
        noun = FAMILIES[family][0]
        example = ""
        if self.example:
            shown = json.dumps(example_record(family, level, record, text), ensure_ascii=False)
            # Its own paragraph after the text; the template puts it there with no gap, so an
            # empty field leaves the option-less prompt as it was.
            example = f"\n\nFor example, another {noun} as JSON: {shown}"
        return text, {"family": family, "noun": noun, "level": level,
                      "schema": schema, "schema_text": json.dumps(schema, indent=2),
                      "text": text, "example": example, "expected": record}

    def source_files(self) -> list[Path]:
        here = Path(__file__).resolve().parent
        return [here / f for f in ("__init__.py", "families.py", "words.py")]

    def fingerprint(self) -> str:
        # The prompts differ with the option, so the content hash must too.
        return super().fingerprint() + (" example=True" if self.example else "")
