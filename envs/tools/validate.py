"""Checking a pack folder before anyone trains on it (``python -m envs validate PATH``).

The checks: the manifest's fields and types; the env it feeds is registered; every JSONL line
parses and carries ``id``, the prompt template's fields and the env's ``required_fields``; ids
are unique; no prompt text appears in two splits; every gold is a well-formed answer of the
pack's type (the env's ``gold_problem``: a ``number`` pack's gold is a number literal, every math
gold parses); and every gold, rendered as a completion by the env's ``gold_completion``, earns
full credit from the env's own ``score``, and that no shallow answer earns any task in full (the
env's ``trivially_passed``: for code, families of programs that return a constant, a shown
answer, a string the prompt shows or a simple transform of an argument; for a record with
``strict_baselines``, none may earn more than half its graded cases), and that no mutant a
record declares (its reference with one edge broken: the env's ``mutants_passed``) earns it in
full. These check form and consistency, not truth: a wrong but well-formed gold (``999999``) passes, so the summary says
"well-formed", never "correct". Every problem is collected, each naming its file and line (or
split and index for loader / generator packs), so one run lists them all.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from envs.base import TaskEnv, make_task_env
from envs.grading import grade_batch, grading_raised
from learner.recipe_files import VARIANTS, RecipeError, check_table
from tasks.pack import (
    MANIFEST,
    OPTIONAL_KEYS,
    REQUIRED_KEYS,
    Manifest,
    Pack,
    PackError,
    Task,
    iter_jsonl,
    load_folder,
    manifest_problems,
    template_fields,
)

#: How ``trivially_passed`` names a program that pays part of a strict record's cases.
_PART = re.compile(r" \([0-9.]+ of the cases\)$")
#: Tasks checked from an unbounded (procedural) split; the report says so.
UNBOUNDED_SAMPLE = 1000
#: Golds graded per call of an env's ``grade_many`` (code envs grade a batch concurrently).
GOLD_BATCH = 64


@dataclass(frozen=True)
class Problem:
    where: str  # "file:line", "file", or "split[index]" for records without a file
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Report:
    folder: Path
    name: str = ""
    env: str = ""
    pack_version: str = ""
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    unbounded: set[str] = field(default_factory=set)
    golds_passed: int = 0
    golds_unchecked: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        name = f"pack '{self.name}'" if self.name else str(self.folder)
        env = f" ({self.env})" if self.env else ""
        sizes = ", ".join(f"{s} {n}" for s, n in self.sizes.items())
        counts = f"{sum(self.sizes.values())} tasks checked" + (f" ({sizes})" if sizes else "")
        golds = (f"{self.golds_passed} golds well-formed and accepted by their own verifier "
                 "(form is checked, not correctness)")
        if self.golds_unchecked:
            golds += f", {self.golds_unchecked} have no gold to check"
        verdict = "OK" if self.ok else "REFUSED"
        return (f"{verdict}: {name}{env}: {counts}; {golds}; "
                f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)")


@dataclass
class _Record:
    where: str
    split: str
    fields: dict[str, Any]
    task: Task | None = None  # set for loader / generator packs, which build their own tasks


def validate_folder(folder: str | Path, *, check_gold: bool = True,
                    unbounded_sample: int = UNBOUNDED_SAMPLE) -> Report:
    """Check the pack in ``folder``; the report lists every problem found."""
    report = Report(Path(folder))
    manifest = _check_manifest(report)
    if manifest is None:
        return report
    report.name, report.env = manifest.name, manifest.env
    env_cls = _env_class(report, manifest)
    try:
        prompt_fields = template_fields(manifest.prompt_template)
    except ValueError as exc:
        report.errors.append(Problem(_manifest_path(report), f"bad prompt_template: {exc}"))
        return report
    required = {f: "the prompt template" for f in sorted(prompt_fields)}
    if env_cls is not None:
        required.update({f: manifest.env for f in env_cls.required_fields})
    pack, records = _records(report, manifest, unbounded_sample)
    good = _check_records(report, manifest, records, required)
    if pack is None:  # a data pack: build it from the records that passed, to grade them
        by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in manifest.splits}
        for rec in good:
            by_split[rec.split].append(rec.fields)
        try:
            pack = Pack(manifest, by_split, origin=f"folder {report.folder}")
        except PackError as exc:
            report.errors.append(Problem(str(report.folder), str(exc)))
            return report
    env = _build_env(report, manifest, pack) if env_cls is not None else None
    if env is not None:
        try:
            # Every check runs whatever the others found; only a verifier that is unavailable
            # (the sandbox) stops the checks that need it.
            if check_gold and _check_golds(report, env, pack, good):
                _check_trivial_programs(report, env, pack, good)
            elif check_gold:
                report.notes.append("trivial programs not checked: the verifier is unavailable")
            else:
                report.notes.append("gold answers not checked (--no-gold)")
        finally:
            env.close()
    if report.ok:
        report.pack_version = pack.pack_version
    return report


# -- manifest ----------------------------------------------------------------------------------
def _manifest_path(report: Report) -> str:
    return str(report.folder / MANIFEST)


def recipe_problems(recipe: object) -> list[str]:
    """What is wrong with a pack's ``[recipe.*]`` tables (``learner.recipe_files``), if anything."""
    if not isinstance(recipe, dict):
        return []  # absent, or reported by manifest_problems
    problems = []
    for variant, table in recipe.items():
        if variant not in VARIANTS:
            problems.append(f"unknown recipe variant '{variant}'; known: {', '.join(VARIANTS)}")
            continue
        try:
            check_table(table, f"[recipe.{variant}]", env_kwargs=False)
        except RecipeError as exc:
            problems.append(str(exc))
    return problems


def _check_manifest(report: Report) -> Manifest | None:
    path = report.folder / MANIFEST
    if not path.is_file():
        report.errors.append(Problem(str(path), f"no {MANIFEST}: not a pack folder"))
        return None
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        report.errors.append(Problem(str(path), f"invalid TOML: {exc}"))
        return None
    problems = manifest_problems(raw)
    known = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)
    # A misspelt optional key ("reward_weight") would otherwise be ignored without a word.
    problems += [f"unknown key '{k}'; known keys: {', '.join(sorted(known))}"
                 for k in raw if k not in known]
    if "splits" in raw and not raw["splits"]:
        problems.append("'splits' is empty")
    problems += recipe_problems(raw.get("recipe"))
    report.errors += [Problem(str(path), p) for p in problems]
    usable = _usable_manifest(raw, report.folder) if problems else raw
    if manifest_problems(usable):
        return None  # the env, the template or the splits are unusable: nothing more to check
    return Manifest.from_dict(usable, root=report.folder, origin=str(path))


#: Manifest keys that only describe the pack: when one is missing or wrong (already reported),
#: the records can still be checked with a stand-in.
_DESCRIPTIVE = ("name", "version", "description", "license", "source")


def _usable_manifest(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``raw`` with its reported problems set aside so that the records can still be checked:
    unknown keys and malformed optional values dropped, descriptive keys stood in for. What the
    checks need (``env``, ``prompt_template``, ``splits``, the loader) is kept as it is."""
    usable = {k: v for k, v in raw.items() if k in REQUIRED_KEYS or k in OPTIONAL_KEYS}
    for key in _DESCRIPTIVE:
        if not isinstance(usable.get(key), str):
            usable[key] = folder.name if key == "name" else "?"
    if "recipe" in usable and (not isinstance(usable["recipe"], dict)
                               or recipe_problems(usable["recipe"])):
        del usable["recipe"]
    if "answer" in usable and not isinstance(usable["answer"], str):
        del usable["answer"]
    weights = usable.get("reward_weights", {})
    if not (isinstance(weights, dict) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in weights.values())):
        usable.pop("reward_weights", None)
    return usable


def _env_class(report: Report, manifest: Manifest) -> type[TaskEnv] | None:
    where = _manifest_path(report)
    if manifest.env not in gym.registry:
        known = ", ".join(sorted(k for k in gym.registry if "/" in k))
        report.errors.append(Problem(where, f"env '{manifest.env}' is not registered "
                                            f"(registered: {known})"))
        return None
    try:
        entry_point = gym.spec(manifest.env).entry_point
        cls = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    except Exception as exc:  # noqa: BLE001 - a third-party env module may raise anything
        report.errors.append(Problem(where, f"cannot load env '{manifest.env}': {exc!r}"))
        return None
    if not (inspect.isclass(cls) and issubclass(cls, TaskEnv)):
        report.errors.append(Problem(where, f"env '{manifest.env}' is not built on "
                                            "envs.base.TaskEnv, so it cannot take a pack"))
        return None
    return cls


# -- records -----------------------------------------------------------------------------------
def _records(report: Report, manifest: Manifest, unbounded_sample: int
             ) -> tuple[Pack | None, Iterator[_Record | Problem]]:
    """The records to check, with their places; for loader / generator packs also the pack."""
    if not (manifest.loader or manifest.generator):
        return None, _jsonl_records(report.folder, manifest)
    try:
        pack = load_folder(report.folder, origin=f"folder {report.folder}")
    except PackError as exc:
        report.errors.append(Problem(_manifest_path(report), str(exc)))
        return None, iter(())
    return pack, _pack_records(report, pack, unbounded_sample)


def _jsonl_records(folder: Path, manifest: Manifest) -> Iterator[_Record | Problem]:
    for split, file in manifest.splits.items():
        path = folder / str(file)
        if not path.is_file():
            yield Problem(str(folder / MANIFEST), f"split '{split}': file '{file}' is missing")
            continue
        try:
            for lineno, rec, problem in iter_jsonl(path):
                if rec is None:
                    yield Problem(f"{path}:{lineno}", problem or "not a JSON record")
                else:
                    yield _Record(f"{path}:{lineno}", split, rec)
        except PackError as exc:
            yield Problem(str(path), str(exc))


def _pack_records(report: Report, pack: Pack, unbounded_sample: int
                  ) -> Iterator[_Record | Problem]:
    for split in pack.splits:
        size = pack.size(split)
        if size is None:
            size = unbounded_sample
            report.unbounded.add(split)
            report.notes.append(f"split '{split}' is unbounded: checked its first {size} tasks")
        for i in range(size):
            try:
                task = pack.task_at(split, i)
            except Exception as exc:  # noqa: BLE001 - generators are third-party code
                yield Problem(f"{split}[{i}]", f"cannot build task: {exc!r}")
                continue
            yield _Record(f"{split}[{i}] ({task.id})", split, dict(task.fields), task)


def _check_records(report: Report, manifest: Manifest, records: Iterator[_Record | Problem],
                   required: dict[str, str]) -> list[_Record]:
    """Structural checks per record; returns the records fit to grade."""
    ids: dict[str, str] = {}
    prompts: dict[bytes, tuple[str, str]] = {}  # digest -> (split, where)
    good: list[_Record] = []
    report.sizes = {s: 0 for s in manifest.splits}
    for item in records:
        if isinstance(item, Problem):
            report.errors.append(item)
            continue
        report.sizes[item.split] += 1
        rec, where = item.fields, item.where
        rec.pop("_line", None)
        problems = []  # every problem of this record, not only its first
        rid = rec.get("id")
        if isinstance(rid, bool) or not isinstance(rid, str | int) or rid == "":
            problems.append("record has no 'id' (a non-empty string or int)")
        elif str(rid) in ids:
            problems.append(f"duplicate id '{rid}' (first at {ids[str(rid)]})")
        else:
            ids[str(rid)] = where
        missing = [f for f in required if f not in rec]
        prompt = None
        if missing:
            needs = "; ".join(f"'{f}' (needed by {required[f]})" for f in missing)
            problems.append(f"missing field(s): {needs}")
        else:  # the template cannot render without its fields: that is the problem above
            try:
                prompt = manifest.prompt_template.format_map(rec)
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                problems.append(f"prompt_template does not fit: {exc!r}")
        if prompt is not None:
            digest = hashlib.sha256(prompt.encode()).digest()
            seen = prompts.setdefault(digest, (item.split, where))
            if seen[1] != where:
                if seen[0] != item.split:
                    problems.append(f"same prompt as {seen[1]} in split '{seen[0]}': splits "
                                    "must be disjoint")
                elif item.split not in report.unbounded:  # a generator may repeat itself
                    report.warnings.append(Problem(where, f"same prompt as {seen[1]}"))
        if problems:
            report.errors += [Problem(where, p) for p in problems]
            continue
        good.append(item)
    return good


# -- gold answers ------------------------------------------------------------------------------
def _build_env(report: Report, manifest: Manifest, pack: Pack) -> TaskEnv | None:
    """The pack's env over this very pack (which also checks the reward weights)."""
    try:
        return make_task_env(manifest.env, pack=pack, split=pack.splits[0])
    except Exception as exc:  # noqa: BLE001 - the env's own constructor decides what is wrong
        report.errors.append(Problem(_manifest_path(report), f"cannot build {manifest.env} "
                                                             f"over this pack: {exc}"))
        return None


def _check_golds(report: Report, env: TaskEnv, pack: Pack, good: list[_Record]) -> bool:
    """Check every gold's form and grade it; False when the verifier was unavailable."""
    batch: list[tuple[str, Task, str]] = []
    for where, task in _tasks(pack, good):
        try:
            problem = env.gold_problem(task)
        except Exception as exc:  # noqa: BLE001
            problem = f"cannot check the gold: {exc!r}"
        if problem is not None:
            report.errors.append(Problem(where, f"gold refused: {problem}"))
            continue
        try:
            completion = env.gold_completion(task)
        except Exception as exc:  # noqa: BLE001
            report.errors.append(Problem(where, f"cannot render the gold: {exc!r}"))
            continue
        if completion is None:
            report.golds_unchecked += 1
            continue
        batch.append((where, task, completion))
        if len(batch) >= GOLD_BATCH:
            if not _grade(report, env, batch):
                return False
            batch = []
    graded = _grade(report, env, batch)
    if report.golds_unchecked:
        report.warnings.append(Problem(str(report.folder), (
            f"{report.golds_unchecked} task(s) have no gold to check (the env's gold_completion "
            "gave none: a grpo/CodeTests-v0 record needs canonical_solution, a "
            "grpo/JsonSchema-v0 one expected), so nothing checked them against a reference")))
    return graded


def _tasks(pack: Pack, good: list[_Record]) -> Iterator[tuple[str, Task]]:
    index = {s: 0 for s in pack.splits}
    for rec in good:
        if rec.task is not None:
            yield rec.where, rec.task
            continue
        # A data pack built from exactly the good records, in order.
        yield rec.where, pack.task_at(rec.split, index[rec.split])
        index[rec.split] += 1


def _grade(report: Report, env: TaskEnv, batch: list[tuple[str, Task, str]]) -> bool:
    """Grade a batch of golds; False when the verifier itself is unavailable (stop there)."""
    if not batch:
        return True
    tasks = [t for _, t, _ in batch]
    completions = [c for _, _, c in batch]
    results = grade_batch(env, tasks, completions)
    for (where, _, completion), (_, info) in zip(batch, results, strict=True):
        raised = grading_raised(info)
        if raised is not None:
            report.errors.append(Problem(where, f"verifier raised {raised}"))
            continue
        verdict = info.get("verdict")
        details = getattr(verdict, "details", {}) or {}
        if details.get("sandbox_error"):
            report.errors.append(Problem(where, "cannot check golds: the sandbox is unavailable "
                                                f"({details.get('error', '')}); the golds from "
                                                "here on were not graded"))
            return False
        if info.get("passed"):
            report.golds_passed += 1
        else:
            shown = _short(completion)
            report.errors.append(Problem(where, f"gold answer fails its own verifier: "
                                                f"{info.get('reason')} (gold completion {shown}, "
                                                f"extracted {_short(str(info.get('extracted')))})"))
    return True


def _check_trivial_programs(report: Report, env: TaskEnv, pack: Pack,
                            good: list[_Record]) -> None:
    """Refuse every task that a shallow answer (a constant, a shown answer, the input echoed or
    simply transformed: the env's ``trivially_passed``) earns in full: its reward would be
    payable without the skill."""
    if type(env).trivially_passed is TaskEnv.trivially_passed:
        return
    refused = {e.where for e in report.errors}  # a task already refused is not run again
    pairs = [(w, task) for w, task in _tasks(pack, good) if w not in refused]
    where = {task.id: w for w, task in pairs}
    try:
        found = env.trivially_passed([task for _, task in pairs])
    except Exception as exc:  # noqa: BLE001 - e.g. the sandbox is unavailable
        report.errors.append(Problem(str(report.folder), f"cannot run the trivial-program "
                                                         f"check: {exc}"))
        return
    for tid, names in found.items():
        if all(_PART.search(n) for n in names):  # a strict record's more-than-half payers
            report.errors.append(Problem(where[tid], "a trivial program earns more than half "
                                                     f"the graded tests: returning "
                                                     f"{' or '.join(names)}; add tests whose "
                                                     "answers differ (balanced outcomes)"))
            continue
        report.errors.append(Problem(where[tid], "a trivial program earns full marks: "
                                                 f"returning {' or '.join(names)} passes every "
                                                 "graded test; add tests whose answers differ"))
    report.notes.append(f"trivial programs checked on {len(where)} tasks")
    _check_mutants(report, env, pairs, where)


def _check_mutants(report: Report, env: TaskEnv, pairs: list[tuple[str, Task]],
                   where: dict[str, str]) -> None:
    """Refuse every task that one of its declared mutants (the reference with one edge
    broken: ``n > 8`` for "at least 8", a dropped zero case) earns in full (the env's
    ``mutants_passed``): its hidden cases miss that edge."""
    if type(env).mutants_passed is TaskEnv.mutants_passed:
        return
    try:
        found = env.mutants_passed([task for _, task in pairs])
    except Exception as exc:  # noqa: BLE001 - e.g. the sandbox is unavailable
        report.errors.append(Problem(str(report.folder), f"cannot run the mutant check: {exc}"))
        return
    for tid, names in found.items():
        report.errors.append(Problem(where[tid], "a wrong program earns full marks: "
                                                 f"{' and '.join(names)} passes every graded "
                                                 "test; add a test on that edge"))


def _short(text: str, limit: int = 120) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
