"""The common machinery of procedural packs (``arith``, ``extract``).

A procedural pack has an unbounded train split and a fixed test split, and the two never share
a problem: a stable hash of each problem's key (its text) picks the one split it may appear in.
Train item ``i`` and the test list are generated from seeds derived from the pack name, the
option combination and the index, so every machine sees the same tasks.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

_TRAIN_ID = re.compile(r"L(?P<level>[0-9]+)-(?P<index>[0-9]+)")


def check_level(level: Any, levels: range) -> None:
    """A ``level=`` pack option is one of ``levels`` or None: True and 2.0 are "in" a range
    of ints too, and would make ids such as "L2.0-5"."""
    if level is not None and (type(level) is not int or level not in levels):
        raise ValueError(f"level must be one of {list(levels)} or omitted, got {level!r}")


def seeded_rng(*key: Any) -> random.Random:
    seed = hashlib.sha256(repr(key).encode()).digest()[:8]
    return random.Random(int.from_bytes(seed, "big"))


class HashSplitGenerator:
    """Base class for a pack ``generator`` (see ``tasks.pack.Generator``).

    Subclasses set ``combos`` (tuples whose first item is the difficulty level) in ``__init__``
    and implement ``build(combo, rng) -> (key, fields)``; ``key`` is the text whose hash picks
    the split. Train ids are ``L<level>-<index>``, test ids ``test-L<level>[-<rest>]-<n>``.
    """

    name: str  # a class attribute, or set per instance (one generator class, many packs)
    test_size: ClassVar[int]  # per combo, or fewer where a combo has fewer distinct problems
    test_percent: ClassVar[int]
    test_attempts: ClassVar[int]  # draws per combo while filling its test list
    #: What each item of a combo is, for the id format in error messages.
    combo_names: ClassVar[tuple[str, ...]] = ("level",)
    combos: list[tuple[Any, ...]]

    @property
    def id_format(self) -> str:
        """The forms of the native ids: ``L<level>-<n>, test-L<level>-<n>``."""
        rest = "".join(f"-<{name}>" for name in self.combo_names[1:])
        return f"L<level>-<n>, test-L<level>{rest}-<n>"

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def draw(self, combo: tuple[Any, ...], rng: random.Random, wanted: Callable[[str], bool]
             ) -> tuple[str, dict[str, Any] | None]:
        """``build``, for a caller that keeps only the keys ``wanted`` accepts: a subclass
        whose fields are costly may return None as the fields of any other key."""
        return self.build(combo, rng)

    def curriculum_keys(self) -> list[str]:
        """One difficulty key per option combination this generator draws from (``L3``,
        ``L2-person``): a curriculum weighs them (``TaskEnv.curriculum_key``)."""
        return [self.combo_key(combo) for combo in self.combos]

    def combo_key(self, combo: tuple[Any, ...]) -> str:
        return "-".join([f"L{combo[0]}", *map(str, combo[1:])])

    def curriculum_key(self, record: Mapping[str, Any]) -> str:
        """The key of a record: that of the combination its train id was drawn from (a train
        id's index picks it, as ``record`` does), else its test id's ``L<level>[-<rest>]``."""
        native = str(record["id"])
        match = _TRAIN_ID.fullmatch(native)
        if match is not None:
            return self.combo_key(self.combos[int(match["index"]) % len(self.combos)])
        return native.removeprefix("test-").rsplit("-", 1)[0]

    def source_files(self) -> list[Path]:
        """Files whose text decides the generated data (part of the pack's content hash)."""
        raise NotImplementedError

    def in_test(self, key: str) -> bool:
        return hashlib.sha256(key.encode()).digest()[0] * 100 < self.test_percent * 256

    @cached_property
    def _test(self) -> list[dict[str, Any]]:
        out = []
        for combo in self.combos:
            rng, seen = seeded_rng(f"{self.name}-test", *combo), set[str]()

            def wanted(key: str, seen: set[str] = seen) -> bool:
                return self.in_test(key) and key not in seen

            for _ in range(self.test_attempts):
                key, fields = self.draw(combo, rng, wanted)
                if wanted(key) and fields is not None:
                    label = "-".join([f"L{combo[0]}", *map(str, combo[1:]), str(len(seen))])
                    seen.add(key)
                    out.append({"id": f"test-{label}", **fields})
                    if len(seen) == self.test_size:
                        break
        return out

    @cached_property
    def _test_index(self) -> dict[str, int]:
        return {rec["id"]: i for i, rec in enumerate(self._test)}

    def size(self, split: str) -> int | None:
        return None if split == "train" else len(self._test)

    def record(self, split: str, index: int) -> dict[str, Any]:
        if split == "test":
            return self._test[index]
        combo = self.combos[index % len(self.combos)]
        rng = seeded_rng(f"{self.name}-train", *combo, index)
        while True:
            key, fields = self.draw(combo, rng, lambda k: not self.in_test(k))
            if not self.in_test(key) and fields is not None:
                return {"id": f"L{combo[0]}-{index}", **fields}

    def locate(self, native_id: str) -> tuple[str, int]:
        """``(split, index)`` of a native id; a ``KeyError`` saying why for an unknown one."""
        if native_id.startswith("test-"):
            if native_id not in self._test_index:
                raise KeyError("no such test task")
            return "test", self._test_index[native_id]
        match = _TRAIN_ID.fullmatch(native_id)
        if match is None:
            raise KeyError("not an id of this pack's forms")
        level, i = int(match["level"]), int(match["index"])
        if self.combos[i % len(self.combos)][0] != level:
            raise KeyError(f"train task {i} is not of level {level} with this pack's options")
        return "train", i

    def fingerprint(self) -> str:
        code = "".join(p.read_text(encoding="utf-8") for p in self.source_files())
        return code + Path(__file__).read_text(encoding="utf-8") + repr(self.combos)
