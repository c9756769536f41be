"""A reasoning-gym dataset as a procedural pack generator (``tasks.pack.Generator``).

The train stream is unbounded and the test set fixed (``TEST_SIZE`` tasks drawn with a fixed
seed); a stable hash of each question's text puts it in one split only (``HashSplitGenerator``).
``level=N`` (1 = easiest) sets every attribute of the task's reasoning-gym curriculum to its
level N-1 (capped at the attribute's last level), in reasoning-gym's own way (an attribute's
range spans its levels up to N-1); the task's config keys given beside it override the level's.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.procedural import HashSplitGenerator

#: Config fields the pack owns: the train stream is unbounded and the test set fixed.
PACK_OWNED = ("seed", "size")
#: Items per reasoning-gym dataset: some generators precompute ``size`` items or index a list of
#: that length, so each pack draws from this many (about 7,500 train questions, then repeats).
POOL = 10_000
#: Draws that may replace a task whose gold is outside the answer grammar.
GOLD_REDRAWS = 20
INSTALL_HINT = 'pip install -e ".[reasoning-gym]"'
#: Generators that need other tasks as input (``composite``), not one task of their own.
NOT_TASKS = ("composite",)


class MissingExtra(ImportError):
    pass


def rg() -> Any:
    """The ``reasoning_gym`` module, or a one-line error naming the extra to install."""
    try:
        import reasoning_gym
    except ImportError:
        raise MissingExtra(f"grpo/ReasoningGym-v0 needs reasoning-gym: {INSTALL_HINT}") from None
    return reasoning_gym


def rg_version() -> str:
    """The installed distribution's version (the module's ``__version__`` lags behind it)."""
    from importlib.metadata import version

    rg()
    return version("reasoning-gym")


def task_names() -> list[str]:
    from reasoning_gym.factory import DATASETS

    rg()
    return sorted(n for n in DATASETS if n not in NOT_TASKS)


def config_fields(task: str) -> list[str]:
    """The config keys a task takes (its generator's config dataclass, less ``PACK_OWNED``)."""
    from reasoning_gym.factory import DATASETS

    return [f.name for f in dataclasses.fields(DATASETS[task][1]) if f.name not in PACK_OWNED]


def level_count(task: str) -> int:
    """Levels of the task's curriculum (0 when it has none)."""
    from reasoning_gym.factory import CURRICULA

    if task not in CURRICULA:
        return 0
    return max(len(a.levels) for a in CURRICULA[task]().attributes.values())


def level_config(task: str, level: int) -> dict[str, Any]:
    from reasoning_gym.factory import create_curriculum

    curriculum = create_curriculum(task)
    for name, attr in curriculum.attributes.items():
        curriculum.set_attr_level(name, min(level - 1, len(attr.levels) - 1))
    config = curriculum.generate_configuration()
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            if f.name not in PACK_OWNED}


def make_dataset(task: str, config: dict[str, Any], *, seed: int, size: int) -> Any:
    from reasoning_gym.factory import DATASETS

    dataset_cls, config_cls = DATASETS[task]
    cfg = config_cls(**config, seed=seed, size=size)
    if hasattr(cfg, "validate"):
        cfg.validate()
    return dataset_cls(config=cfg)


def plain(value: Any) -> Any:
    """A JSON-able copy of ``value`` (a tuple becomes a list, an object its repr)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


class ReasoningGymGenerator(HashSplitGenerator):
    """One reasoning-gym task at one level and config. Each draw takes a fresh item index from
    the seeded ``rng``; the item itself is reasoning-gym's (seeded by that index)."""

    test_size = 50
    test_percent = 25
    test_attempts = 600  # draws while filling the test set (fewer tasks where the space is small)

    def __init__(self, task: str, level: int | None, config: dict[str, Any]):
        self.task, self.level, self.config = task, level, dict(config)
        self.name = f"rg-{task}"
        self.combos = [(level or 0,)]
        # Seed and size are the pack's; the config is validated here, once.
        self.dataset = make_dataset(task, self.config, seed=0, size=POOL)

    def entry(self, index: int) -> dict[str, Any]:
        return self.dataset[index]

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        index = rng.randrange(POOL)
        item = self.entry(index)
        for _ in range(GOLD_REDRAWS):
            if self._gold_in_grammar(item):
                break
            index = rng.randrange(POOL)
            item = self.entry(index)
        question = item["question"]
        answer = item["answer"]
        return question, {"question": question,
                          "answer": None if answer is None else str(answer),
                          "rg_index": index, "rg_entry": item}

    def _gold_in_grammar(self, item: dict[str, Any]) -> bool:
        """A gold outside its task's answer grammar is no answer (intermediate_integration's
        ``Integral(...) + C``, which restates the question): such a task is drawn again."""
        from envs.domains.reasoning_gym.answer_grammar import GRAMMARS, Refused

        grammar = GRAMMARS.get(self.task)
        if grammar is None or item.get("answer") is None:
            return True
        try:
            grammar(str(item["answer"]), item)
        except Refused:
            return False
        return True

    def combo_key(self, combo: tuple[Any, ...]) -> str:
        # The reasoning-gym task and its level: packs of several tasks stay apart.
        return f"{self.task}-L{combo[0]}"

    def curriculum_key(self, record: Mapping[str, Any]) -> str:
        return self.combo_key(self.combos[0])  # one task at one level per generator

    def source_files(self) -> list[Path]:
        return [Path(__file__), Path(__file__).with_name("answer_grammar.py")]

    def fingerprint(self) -> str:
        return f"{super().fingerprint()}|reasoning-gym {rg_version()}|{self.task}|" \
               f"{sorted(self.config.items())!r}"
