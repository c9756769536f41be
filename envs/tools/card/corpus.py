"""The report card's shipped corpora: known hacks and honest answers, one JSON object a line.

``envs/tools/card/corpora/<domain>_hacks.jsonl`` and ``<domain>_honest.jsonl`` (``domain`` is
``math``, ``code`` or ``json``; every fix appends the variants it closed or kept). A line::

    {"id": "...", "env": "grpo/MathExact-v0", "env_kwargs": {"pack": "math500"},
     "task_id": "math500/31"  (or "task": {inline record fields}),
     "completion": "...", "class": "...", "source": "..."}

A hacks line must earn no correctness, an honest line must pass. The card grades each line
with the env its ``env`` and ``env_kwargs`` name; a line belongs to the card of that env and
of the pack ``env_kwargs["pack"]`` (the env's default pack when absent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The folder the built-in corpora live in.
CORPORA = Path(__file__).resolve().parent / "corpora"
KINDS = ("hacks", "honest")
_REQUIRED = ("id", "env", "completion")


class CorpusError(ValueError):
    """A corpus line that does not follow the format (the message names file and line)."""


@dataclass(frozen=True)
class Line:
    id: str
    kind: str  # "hacks" or "honest"
    env: str
    env_kwargs: dict[str, Any]
    completion: str
    task_id: str | None = None
    task: dict[str, Any] | None = None
    cls: str = ""
    where: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def pack_name(self, default_pack: str) -> str:
        return str(self.env_kwargs.get("pack") or default_pack)


def read_file(path: Path, kind: str) -> list[Line]:
    """Every line of one corpus file; a malformed line is a ``CorpusError`` naming it."""
    lines = []
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if text.strip():
                lines.append(_parse(json_line(text, f"{path}:{number}"), kind,
                                    f"{path.name}:{number}"))
    return lines


def json_line(text: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: invalid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: a line is a JSON object")
    return record


def _parse(record: dict[str, Any], kind: str, where: str) -> Line:
    missing = [k for k in _REQUIRED if not isinstance(record.get(k), str)]
    if missing:
        raise CorpusError(f"{where}: missing or non-string field(s) {missing}")
    if ("task_id" in record) == ("task" in record):
        raise CorpusError(f"{where}: give exactly one of task_id and task")
    kwargs = record.get("env_kwargs") or {}
    task = record.get("task")
    if not isinstance(kwargs, dict) or (task is not None and not isinstance(task, dict)):
        raise CorpusError(f"{where}: env_kwargs and task are JSON objects")
    if task is not None and "id" not in task:
        raise CorpusError(f"{where}: an inline task has an id")
    known = {*_REQUIRED, "env_kwargs", "task_id", "task", "class", "source"}
    return Line(id=record["id"], kind=kind, env=record["env"], env_kwargs=kwargs,
                completion=record["completion"], task_id=record.get("task_id"), task=task,
                cls=str(record.get("class", "")), where=where,
                extra={k: v for k, v in record.items() if k not in known})


def load(folders: Sequence[Path] = (CORPORA,)) -> list[Line]:
    """Every line of every ``*_hacks.jsonl`` and ``*_honest.jsonl`` in ``folders``; ids are
    unique within a file (a repeated one is an error)."""
    lines: list[Line] = []
    for folder in folders:
        for kind in KINDS:
            for path in sorted(Path(folder).glob(f"*_{kind}.jsonl")):
                found = read_file(path, kind)
                _unique(found, path)
                lines.extend(found)
    return lines


def _unique(lines: Iterable[Line], path: Path) -> None:
    seen: dict[str, str] = {}
    for line in lines:
        if line.id in seen:
            raise CorpusError(f"{line.where}: id '{line.id}' already used at {seen[line.id]}")
        seen[line.id] = line.where


def for_card(lines: Iterable[Line], env_id: str, pack: str, default_pack: str) -> list[Line]:
    """The lines that belong to the card of ``env_id`` over ``pack``."""
    return [line for line in lines if line.env == env_id and line.pack_name(default_pack) == pack]
