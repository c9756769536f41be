"""Procedural structured extraction: prose about a record in, the record as schema-valid JSON out.

Five families (people, orders, events, products, addresses; see ``tasks.extract.families``) in
four levels (``level=`` pack option, omitted means all mixed); ``family=`` narrows to one.
Each record holds the JSON Schema, the prose and the generated record as ``expected``.

Train ids ``L<level>-<index>`` are unbounded; the test split is fixed (``TEST_SIZE`` per level
and family). The two never share a task: every text is assigned to one split by a stable hash.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tasks.extract.families import FAMILIES
from tasks.procedural import HashSplitGenerator

LEVELS = range(1, 5)
TEST_SIZE = 20  # per level and family


def _build(family: str, level: int, rng: random.Random) -> tuple[dict, dict, str]:
    _, build = FAMILIES[family]
    schema, record, sentences = build(rng, level)
    if level >= 3:  # later sentences in any order: the model must not rely on field order
        rest = sentences[1:]
        rng.shuffle(rest)
        sentences = sentences[:1] + rest
    return schema, record, " ".join(sentences)


class ExtractGenerator(HashSplitGenerator):
    """The ``generator`` of the ``extract`` pack (see ``tasks.pack.Generator``)."""

    name = "extract"
    test_size = TEST_SIZE
    test_percent = 20
    test_attempts = TEST_SIZE * 50
    combo_names = ("level", "family")

    def __init__(self, level: int | None = None, family: str | None = None):
        # True and 2.0 are "in" range(1, 7) too, and would make ids such as "L2.0-5".
        if level is not None and (type(level) is not int or level not in LEVELS):
            raise ValueError(f"level must be one of {list(LEVELS)} or omitted, got {level!r}")
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)} or omitted, "
                             f"got {family!r}")
        self.level = level
        self.family = family
        levels = [level] if level else list(LEVELS)
        families = [family] if family else list(FAMILIES)
        self.combos = [(lv, fam) for lv in levels for fam in families]

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        level, family = combo
        schema, record, text = _build(family, level, rng)
        return text, {"family": family, "noun": FAMILIES[family][0], "level": level,
                      "schema": schema, "schema_text": json.dumps(schema, indent=2),
                      "text": text, "expected": record}

    def source_files(self) -> list[Path]:
        here = Path(__file__).resolve().parent
        return [here / f for f in ("__init__.py", "families.py", "words.py")]
