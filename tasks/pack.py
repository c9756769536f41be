"""Task packs: a manifest (``pack.toml``) plus records, from JSONL files, a loader or a generator.

A pack folder holds ``pack.toml`` with these keys:

- ``name``, ``version``, ``description``, ``license``, ``source``: strings;
- ``env``: the env id the pack feeds (``grpo/MathExact-v0``);
- ``splits``: a table ``split -> JSONL file`` for data packs, or a list of split names when the
  records come from ``loader`` / ``generator``;
- ``prompt_template``: a ``str.format`` template over the record's fields;
- ``reward_weights`` (optional table): overrides the env's default weights;
- ``answer`` (optional string): what an answer is, for envs that tell answer types apart.
  ``grpo/MathExact-v0`` knows ``"number"`` (a number literal: ``156``, ``-3/4``,
  ``\\frac{3}{4}``; never an expression such as ``90+66``) and ``"expression"`` (any value
  the symbolic checker understands), the default for a pack that does not say;
- ``loader`` (optional): ``"module:function"`` returning ``{split: [record, ...]}`` (used by
  built-in packs that read datasets from installed packages);
- ``generator`` (optional): ``"module:Class"`` for procedural packs (see ``ProceduralPack``).

Each record is a dict with a unique ``id`` (the native id; the task id is ``<pack>/<id>``) plus
the fields the env needs. ``pack_version`` = manifest version + a content hash, so every episode
records exactly which data it came from.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import math
import re
import string
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

MANIFEST = "pack.toml"
REQUIRED_KEYS = {
    "name": str,
    "version": str,
    "description": str,
    "license": str,
    "source": str,
    "env": str,
    "prompt_template": str,
}
OPTIONAL_KEYS = ("splits", "reward_weights", "loader", "generator", "answer", "recipe")


class PackError(ValueError):
    """A pack is malformed or a task cannot be found; the message names file and line."""


class UnknownOptionError(PackError):
    """Options a pack does not take; ``accepted`` names those it does (an env names its own
    keywords too, since a misspelled env keyword lands here)."""

    def __init__(self, pack: str, unknown: Iterable[str], accepted: Sequence[str]):
        self.pack, self.unknown, self.accepted = pack, sorted(unknown), list(accepted)
        takes = f"takes options {', '.join(accepted)}" if accepted else "takes no options"
        super().__init__(f"pack '{pack}' {takes}, got {self.unknown}")


@dataclass(frozen=True)
class Task:
    """One task: ``id`` is ``<pack>/<native id>``; ``fields`` is the record (prompt fields, gold)."""

    id: str
    split: str
    fields: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    description: str
    license: str
    source: str
    env: str
    prompt_template: str
    splits: dict[str, str | None]
    reward_weights: dict[str, float] = field(default_factory=dict)
    answer: str | None = None
    loader: str | None = None
    generator: str | None = None
    root: Path | None = None
    #: The learner's settings for this pack by variant (``[recipe.cpu]``, ``[recipe.gpu]``),
    #: over the env's (``learner.recipe_files``); checked there.
    recipe: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, folder: str | Path) -> Manifest:
        folder = Path(folder)
        path = folder / MANIFEST
        if not path.is_file():
            raise PackError(f"{path}: no {MANIFEST} in pack folder")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PackError(f"{path}: invalid TOML: {exc}") from exc
        return cls.from_dict(raw, root=folder, origin=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, root: Path | None, origin: str) -> Manifest:
        problems, splits, weights = _check_manifest(raw)
        if problems:
            raise PackError(f"{origin}: " + "; ".join(problems))
        return cls(
            name=raw["name"],
            version=raw["version"],
            description=raw["description"],
            license=raw["license"],
            source=raw["source"],
            env=raw["env"],
            prompt_template=raw["prompt_template"],
            splits=splits,
            reward_weights={k: float(v) for k, v in weights.items()},
            answer=raw.get("answer"),
            loader=raw.get("loader"),
            generator=raw.get("generator"),
            root=root,
            recipe=dict(raw.get("recipe") or {}),
        )


def manifest_problems(raw: Mapping[str, Any]) -> list[str]:
    """Every problem with a parsed ``pack.toml`` (empty when it is well-formed)."""
    return _check_manifest(raw)[0]


def _check_manifest(
    raw: Mapping[str, Any],
) -> tuple[list[str], dict[str, str | None], dict[str, Any]]:
    problems = []
    for key, typ in REQUIRED_KEYS.items():
        if key not in raw:
            problems.append(f"missing key '{key}'")
        elif not isinstance(raw[key], typ):
            problems.append(f"'{key}' must be a {typ.__name__}")
    splits_raw = raw.get("splits")
    splits: dict[str, str | None] = {}
    if isinstance(splits_raw, dict):
        for split, file in splits_raw.items():
            if not isinstance(file, str):
                problems.append(f"splits.{split} must be a file name")
            splits[split] = file
    elif isinstance(splits_raw, list) and all(isinstance(s, str) for s in splits_raw):
        splits = {s: None for s in splits_raw}
    else:
        problems.append("'splits' must be a table split -> file or a list of split names")
    weights = raw.get("reward_weights", {})
    if not isinstance(weights, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in weights.values()
    ):  # TOML reads `nan` and `inf` as floats: a NaN weight would make every reward NaN
        problems.append("'reward_weights' must be a table of finite numbers")
        weights = {}
    if "recipe" in raw and not isinstance(raw["recipe"], dict):
        problems.append("'recipe' must be a table of variants ([recipe.cpu], [recipe.gpu])")
    if "answer" in raw and not isinstance(raw["answer"], str):
        problems.append("'answer' must be a string (an answer type such as \"number\")")
    sources = [k for k in ("loader", "generator") if k in raw]
    for key in sources:
        if not isinstance(raw[key], str) or ":" not in raw[key]:
            problems.append(f"'{key}' must be 'module:attribute'")
    if len(sources) > 1:
        problems.append("give either 'loader' or 'generator', not both")
    if not sources and any(f is None for f in splits.values()):
        problems.append("a data pack's 'splits' must map each split to a JSONL file")
    return problems, splits, weights


def template_fields(template: str) -> set[str]:
    """The record fields a ``str.format`` prompt template reads (``{a[0]}`` reads ``a``)."""
    fields = set()
    for _, name, _, _ in string.Formatter().parse(template):
        if name:
            fields.add(name.split(".")[0].split("[")[0])
    return fields


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PackError(f"cannot import '{spec}': {exc}") from exc
    return obj


def _hash_records(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    digest = hashlib.sha256()
    for split in sorted(records):
        digest.update(split.encode())
        for rec in records[split]:
            digest.update(json.dumps(rec, sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """``(line number, record, None)`` per good line and ``(line number, None, problem)`` per
    bad one, streaming, so a validator can report every bad line of a huge file."""
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield lineno, None, f"invalid JSON: {exc.msg}"
                    continue
                if not isinstance(rec, dict):
                    yield lineno, None, "a record must be a JSON object"
                    continue
                rec.setdefault("_line", lineno)
                yield lineno, rec, None
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(f"{path}: cannot read: {exc}") from exc


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse a JSONL file; every bad line is reported with file and line number."""
    records: list[dict[str, Any]] = []
    problems = []
    for lineno, rec, problem in iter_jsonl(path):
        if rec is None:
            problems.append(f"{path}:{lineno}: {problem}")
        else:
            records.append(rec)
    if problems:
        raise PackError("\n".join(problems))
    return records


class Pack:
    """A finite pack: records per split, from JSONL files or a loader function."""

    def __init__(self, manifest: Manifest, records: Mapping[str, Sequence[Mapping[str, Any]]],
                 origin: str = "built-in"):
        self.manifest = manifest
        self.origin = origin
        self._records: dict[str, list[dict[str, Any]]] = {}
        self._index: dict[str, tuple[str, int]] = {}
        problems = []
        for split in manifest.splits:
            rows: list[dict[str, Any]] = []
            for i, one in enumerate(records.get(split, [])):
                rec = dict(one)
                where = rec.pop("_line", None)
                place = f"{manifest.splits[split] or split}:{where or i + 1}"
                if "id" not in rec or not isinstance(rec["id"], str | int) or rec["id"] == "":
                    problems.append(f"{place}: record has no 'id'")
                    continue
                rec["id"] = rid = str(rec["id"])
                if rid in self._index:
                    other = self._index[rid][0]
                    problems.append(f"{place}: duplicate id '{rid}' (also in split {other})")
                    continue
                self._index[rid] = (split, len(rows))
                rows.append(rec)
            self._records[split] = rows
        if problems:
            raise PackError(f"pack '{manifest.name}': " + "\n".join(problems[:50]))
        self._hash: str | None = None

    # -- identity -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def env(self) -> str:
        return self.manifest.env

    @property
    def splits(self) -> list[str]:
        return list(self.manifest.splits)

    def content_hash(self) -> str:
        if self._hash is None:
            self._hash = _hash_records(self._records)
        return self._hash

    @property
    def pack_version(self) -> str:
        return f"{self.manifest.version}+{self.content_hash()[:12]}"

    # -- access -------------------------------------------------------------------------------
    def _check_split(self, split: str) -> None:
        if split not in self.manifest.splits:
            raise PackError(
                f"pack '{self.name}' has no split '{split}'; it has: {', '.join(self.splits)}"
            )

    def size(self, split: str) -> int | None:
        """Number of tasks in ``split``; ``None`` means unbounded (procedural)."""
        self._check_split(split)
        return len(self._records[split])

    def task_at(self, split: str, index: int) -> Task:
        self._check_split(split)
        rec = self._records[split][index]
        return Task(f"{self.name}/{rec['id']}", split, rec)

    def get(self, task_id: str) -> Task:
        """Look up ``<pack>/<native id>`` (or a bare native id)."""
        native = self._native(task_id)
        if native not in self._index:
            raise self.unknown_task(task_id)
        split, i = self._index[native]
        return self.task_at(split, i)

    def unknown_task(self, task_id: str, why: str = "") -> PackError:
        """The error for an id that names no task: says what the pack's ids look like."""
        why = f" ({why})" if why else ""
        return PackError(f"pack '{self.name}' has no task '{task_id}'{why}; its task ids look "
                         f"like {self.id_format()}")

    def id_format(self) -> str:
        """The forms of this pack's task ids, digits as ``<n>`` (with their range when an id
        has one number): ``gsm8k/<n> (<n> from 0 to 1318)``."""
        numbers: dict[str, list[int]] = {}
        for native in self._index:
            form = _DIGITS.sub("<n>", native)
            numbers.setdefault(form, []).extend(int(d) for d in _DIGITS.findall(native))
        shown = []
        for form, found in list(numbers.items())[:_FORMS_SHOWN]:
            one = form.count("<n>") == 1
            shown.append(f"{self.name}/{form}"
                         + (f" (<n> from {min(found)} to {max(found)})" if one else ""))
        more = len(numbers) - len(shown)
        return ", ".join(shown) + (f" and {more} more forms" if more > 0 else "")

    def ids(self, split: str) -> list[str]:
        self._check_split(split)
        return [f"{self.name}/{r['id']}" for r in self._records[split]]

    def records(self, split: str) -> list[dict[str, Any]]:
        self._check_split(split)
        return self._records[split]

    def prompt(self, task: Task) -> str:
        try:
            return self.manifest.prompt_template.format_map(task.fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise PackError(
                f"pack '{self.name}': prompt_template does not fit task {task.id}: {exc!r}"
            ) from exc

    def _native(self, task_id: str) -> str:
        prefix = self.name + "/"
        return task_id[len(prefix):] if task_id.startswith(prefix) else task_id


_DIGITS = re.compile(r"[0-9]+")
_FORMS_SHOWN = 8


class Generator(Protocol):
    """What a procedural pack's ``generator`` class provides.

    It is constructed with the pack options (``level=1``, ...), the parameters of its
    ``__init__`` (an option it does not name is an ``UnknownOptionError``), and raises
    ``ValueError`` for a bad value. ``size(split)`` is ``None`` for an unbounded split;
    ``record(split, index)`` is deterministic; ``locate(native_id)`` maps an id back to
    ``(split, index)``, raising ``KeyError("why")`` for an unknown one. An optional
    ``id_format`` (``"L<level>-<n>"``) says in errors what the native ids look like.
    """

    def size(self, split: str) -> int | None: ...
    def record(self, split: str, index: int) -> dict[str, Any]: ...
    def locate(self, native_id: str) -> tuple[str, int]: ...
    def fingerprint(self) -> str: ...


class ProceduralPack(Pack):
    """A pack whose records are generated on demand, deterministically."""

    def __init__(self, manifest: Manifest, generator: Generator, origin: str = "built-in"):
        super().__init__(manifest, {}, origin)
        self.generator = generator

    def content_hash(self) -> str:
        if self._hash is None:
            self._hash = hashlib.sha256(self.generator.fingerprint().encode()).hexdigest()
        return self._hash

    def size(self, split: str) -> int | None:
        self._check_split(split)
        return self.generator.size(split)

    def task_at(self, split: str, index: int) -> Task:
        self._check_split(split)
        size = self.generator.size(split)
        if index < 0 or (size is not None and index >= size):
            raise PackError(f"pack '{self.name}': index {index} out of range for split {split}")
        rec = self.generator.record(split, index)
        return Task(f"{self.name}/{rec['id']}", split, rec)

    def get(self, task_id: str) -> Task:
        native = self._native(task_id)
        try:
            split, index = self.generator.locate(native)
        except (ValueError, KeyError) as exc:
            why = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
            raise self.unknown_task(task_id, why) from None
        task = self.task_at(split, index)
        if task.id != f"{self.name}/{native}":
            raise self.unknown_task(task_id)
        return task

    def id_format(self) -> str:
        """The generator's ``id_format`` (when it has one) and an example id per split."""
        forms = [f"{self.name}/{f}" for f in getattr(self.generator, "id_format", "").split(", ")
                 if f]
        examples = [self.task_at(s, 0).id for s in self.splits if self.size(s) != 0]
        return ", ".join([*forms, f"e.g. {', '.join(examples)}"])

    def ids(self, split: str) -> list[str]:
        size = self.size(split)
        if size is None:
            raise PackError(f"split '{split}' of pack '{self.name}' is unbounded")
        return [self.task_at(split, i).id for i in range(size)]

    def records(self, split: str) -> list[dict[str, Any]]:
        return [dict(self.task_at(split, i).fields) for i in range(len(self.ids(split)))]


def option_names(generator: type) -> list[str] | None:
    """The options a generator class takes (``None`` when it takes any ``**options``)."""
    params = list(inspect.signature(generator).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def load_folder(folder: str | Path, origin: str = "built-in", **options: Any) -> Pack:
    """Load the pack in ``folder`` (options go to a procedural pack's generator)."""
    manifest = Manifest.read(folder)
    if manifest.generator:
        cls = _import(manifest.generator)
        accepted = option_names(cls)
        if accepted is not None and set(options) - set(accepted):
            raise UnknownOptionError(manifest.name, set(options) - set(accepted), accepted)
        try:
            gen = cls(**options)
        except (TypeError, ValueError) as exc:
            raise PackError(f"pack '{manifest.name}': bad options {options}: {exc}") from exc
        return ProceduralPack(manifest, gen, origin)
    if options:
        raise UnknownOptionError(manifest.name, list(options), ())
    if manifest.loader:
        records = _import(manifest.loader)()
    else:
        bare = [s for s, f in manifest.splits.items() if f is None]
        if bare:
            raise PackError(f"pack '{manifest.name}': splits {bare} name no file, and the pack "
                            "has no loader or generator")
        records = {s: read_jsonl(Path(folder) / f) for s, f in manifest.splits.items()
                   if f is not None}
    return Pack(manifest, records, origin)
