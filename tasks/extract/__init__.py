"""Procedural structured extraction: prose about a record in, the record as schema-valid JSON out.

Five families (people, orders, events, products, addresses; see ``tasks.extract.families``) in
four levels (``level=`` pack option, omitted means all mixed); ``family=`` narrows to one.
Each record holds the JSON Schema, the prose and the generated record as ``expected``.

Train ids ``L<level>-<index>`` are unbounded; the test split is fixed (``TEST_SIZE`` per level
and family). The two never share a task: every text is assigned to one split by a stable hash.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import cached_property
from pathlib import Path
from typing import Any

from tasks.extract.families import FAMILIES

LEVELS = range(1, 5)
TEST_SIZE = 20  # per level and family
TEST_PERCENT = 20


def _rng(*key: Any) -> random.Random:
    seed = hashlib.sha256(repr(key).encode()).digest()[:8]
    return random.Random(int.from_bytes(seed, "big"))


def _is_test(text: str) -> bool:
    return hashlib.sha256(text.encode()).digest()[0] * 100 < TEST_PERCENT * 256


def _build(family: str, level: int, rng: random.Random) -> tuple[dict, dict, str]:
    _, build = FAMILIES[family]
    schema, record, sentences = build(rng, level)
    if level >= 3:  # later sentences in any order: the model must not rely on field order
        rest = sentences[1:]
        rng.shuffle(rest)
        sentences = sentences[:1] + rest
    return schema, record, " ".join(sentences)


def _record(native_id: str, family: str, level: int, built: tuple[dict, dict, str]
            ) -> dict[str, Any]:
    schema, record, text = built
    return {"id": native_id, "family": family, "noun": FAMILIES[family][0], "level": level,
            "schema": schema, "schema_text": json.dumps(schema, indent=2), "text": text,
            "expected": record}


class ExtractGenerator:
    """The ``generator`` of the ``extract`` pack (see ``tasks.pack.Generator``)."""

    def __init__(self, level: int | None = None, family: str | None = None):
        if level is not None and level not in LEVELS:
            raise ValueError(f"level must be one of {list(LEVELS)} or omitted, got {level!r}")
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)} or omitted, "
                             f"got {family!r}")
        self.level = level
        self.family = family
        levels = [level] if level else list(LEVELS)
        families = [family] if family else list(FAMILIES)
        self.combos = [(lv, fam) for lv in levels for fam in families]

    @cached_property
    def _test(self) -> list[dict[str, Any]]:
        out = []
        for level, family in self.combos:
            rng, seen = _rng("extract-test", level, family), set()
            for _ in range(TEST_SIZE * 50):
                built = _build(family, level, rng)
                if _is_test(built[2]) and built[2] not in seen:
                    seen.add(built[2])
                    out.append(_record(f"test-L{level}-{family}-{len(seen) - 1}", family, level,
                                       built))
                    if len(seen) == TEST_SIZE:
                        break
        return out

    def size(self, split: str) -> int | None:
        return None if split == "train" else len(self._test)

    def record(self, split: str, index: int) -> dict[str, Any]:
        if split == "test":
            return self._test[index]
        level, family = self.combos[index % len(self.combos)]
        rng = _rng("extract-train", level, family, index)
        while True:
            built = _build(family, level, rng)
            if not _is_test(built[2]):
                return _record(f"L{level}-{index}", family, level, built)

    def locate(self, native_id: str) -> tuple[str, int]:
        if native_id.startswith("test-"):
            for i, rec in enumerate(self._test):
                if rec["id"] == native_id:
                    return "test", i
            raise KeyError(native_id)
        level, _, index = native_id.removeprefix("L").partition("-")
        i = int(index)
        if i < 0 or self.combos[i % len(self.combos)][0] != int(level):
            raise KeyError(f"{native_id} is not a task of this pack's options")
        return "train", i

    def fingerprint(self) -> str:
        here = Path(__file__).resolve().parent
        code = "".join((here / f).read_text(encoding="utf-8")
                       for f in ("__init__.py", "families.py", "words.py"))
        return code + repr((self.level, self.family))
