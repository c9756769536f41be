"""Each pack's env, version and split sizes, cached on disk so ``python -m envs list`` answers
at once.

Counting a pack's tasks means loading it, and for a procedural pack building its test split
(``pyfunc`` filters thousands of drawn functions through its shallow-program check): about ten
seconds in all. A pack's entry is keyed by what decides its data: the text of every source file
of its folder and of ``tasks/``'s own modules (``pack.toml`` included), the version of the
distribution it came from, and the size and modification time of every installed data file its
loader read (``tasks.sources.package_file`` reports them). Any change loads the pack again.

The file lives in ``$GRPO_GYM_CACHE`` (default ``~/.cache/grpo-gym``), ``pack-index.json``; a
folder that cannot be written only costs the time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tasks import sources
from tasks.pack import load_folder
from tasks.registry import BUILTIN_ROOT, PackSource, pack_sources

FORMAT = 1
#: Files read for their text; others (data) by size and time, which is enough to see a change.
_TEXT_SUFFIXES = {".py", ".toml"}


@dataclass(frozen=True)
class PackSummary:
    name: str
    env: str
    version: str  # pack_version: the manifest version + the data's content hash
    sizes: dict[str, int | None]  # split -> tasks; None = unbounded


def index_path() -> Path:
    base = os.environ.get("GRPO_GYM_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "grpo-gym") / "pack-index.json"


def _stat(path: Path) -> list[Any]:
    st = path.stat()
    return [str(path), st.st_size, st.st_mtime_ns]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def source_key(src: PackSource) -> str:
    """The hash of what decides a pack's data, short of the installed files its loader reads."""
    digest = hashlib.sha256(f"{FORMAT}|{src.name}|{src.origin}|{src.folder}".encode())
    if src.origin.startswith("distribution "):
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(metadata.version(src.origin.removeprefix("distribution ")).encode())
    core = sorted(BUILTIN_ROOT.glob("*.py"))
    for path in [*core, *_files(src.folder)]:
        digest.update(path.name.encode())
        if path.suffix in _TEXT_SUFFIXES:
            digest.update(path.read_bytes())
        else:
            digest.update(repr(_stat(path)[1:]).encode())
    return digest.hexdigest()


def _read_index(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw.get("packs", {}) if isinstance(raw, dict) and raw.get("format") == FORMAT else {}


def _still_valid(entry: dict[str, Any], key: str) -> bool:
    if entry.get("key") != key:
        return False
    try:
        return all(_stat(Path(dep[0])) == dep for dep in entry.get("deps", []))
    except OSError:  # a data file went away
        return False


def _summarise(src: PackSource) -> tuple[PackSummary, list[list[Any]]]:
    """Load the pack (its data files are recorded as they are read) and count its splits."""
    with sources.recording_reads() as read:
        # load_folder, not the cached load_pack: a pack loaded before would read no file now
        pack = load_folder(src.folder, origin=src.origin)
        sizes = {split: pack.size(split) for split in pack.splits}
        summary = PackSummary(src.name, pack.env, pack.pack_version, sizes)
    return summary, [_stat(p) for p in sorted(set(read))]


def _write_index(path: Path, packs: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False,
                                         suffix=".tmp", encoding="utf-8") as fh:
            json.dump({"format": FORMAT, "packs": packs}, fh, indent=1)
        os.replace(fh.name, path)
    except OSError:
        pass  # a read-only home: the next listing loads the packs again


def pack_summaries(names: list[str] | None = None, *, progress: Any = None
                   ) -> dict[str, PackSummary | Exception]:
    """Name -> summary for each pack (all known packs by default), from the index where it is
    current; a pack that cannot be loaded maps to its ``PackError`` (not cached).
    ``progress(name)`` is called before a pack is loaded afresh."""
    from tasks.pack import PackError

    found = pack_sources()
    path = index_path()
    cached = _read_index(path)
    out: dict[str, PackSummary | Exception] = {}
    changed = False
    for name in sorted(found) if names is None else names:
        key = source_key(found[name])
        slot = f"{name} {found[name].folder}"  # two clones' packs keep their own entries
        entry = cached.get(slot)
        if entry is not None and _still_valid(entry, key):
            out[name] = PackSummary(name, entry["env"], entry["version"], entry["sizes"])
            continue
        if progress is not None:
            progress(name)
        try:
            summary, deps = _summarise(found[name])
        except PackError as exc:
            out[name] = exc
            continue
        out[name] = summary
        cached[slot] = {"key": key, "deps": deps, "env": summary.env,
                        "version": summary.version, "sizes": summary.sizes}
        changed = True
    if changed:
        _write_index(path, cached)
    return out


if __name__ == "__main__":  # set-up builds the index once, so the first listing is quick too
    done = pack_summaries()
    ok = sum(not isinstance(s, Exception) for s in done.values())
    print(f"setup: indexed {ok} of {len(done)} packs for python -m envs list ({index_path()})")
