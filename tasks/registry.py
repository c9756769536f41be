"""Finding packs: the built-in folders under ``tasks/`` and the ``grpo_gym.packs`` entry points.

An entry point in ``grpo_gym.packs`` names an importable package whose folder holds a
``pack.toml`` (``mypack = "my_dist.mypack"``). A broken third-party entry point is reported as
a warning naming its distribution; it never breaks ``import envs``.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from tasks.pack import MANIFEST, Manifest, Pack, PackError, load_folder

BUILTIN_ROOT = Path(__file__).resolve().parent
ENTRY_POINT_GROUP = "grpo_gym.packs"


@dataclass(frozen=True)
class PackSource:
    name: str
    folder: Path
    origin: str  # "built-in" or "distribution <name>"


def _entry_point_folder(ep: Any) -> Path:
    module = importlib.import_module(ep.module)
    obj = module
    if ep.attr:
        obj = getattr(module, ep.attr)
        if callable(obj):
            obj = obj()
        return Path(obj)
    if module.__file__ is None:  # a namespace package has no folder of its own
        raise ValueError(f"entry point {ep.value!r}: module {ep.module} is a namespace package; "
                         "name a module:attribute that returns the pack folder")
    return Path(module.__file__).resolve().parent


@functools.cache
def pack_sources() -> dict[str, PackSource]:
    """Every known pack by name. Duplicate names are an error naming both sources."""
    found: dict[str, PackSource] = {}

    def add(src: PackSource) -> None:
        if src.name in found:
            other = found[src.name]
            raise PackError(
                f"duplicate pack name '{src.name}': {other.origin} ({other.folder}) and "
                f"{src.origin} ({src.folder})"
            )
        found[src.name] = src

    for manifest_path in sorted(BUILTIN_ROOT.glob(f"*/{MANIFEST}")):
        add(PackSource(Manifest.read(manifest_path.parent).name, manifest_path.parent, "built-in"))
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else "?"
        try:
            folder = _entry_point_folder(ep)
            manifest = Manifest.read(folder)
        except Exception as exc:  # noqa: BLE001 - third-party code may raise anything
            warnings.warn(
                f"grpo-gym: ignoring pack entry point '{ep.name}' of distribution '{dist}': {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        add(PackSource(manifest.name, folder, f"distribution {dist}"))
    return found


def pack_names(env_id: str | None = None) -> list[str]:
    """Names of all packs, or of those that feed ``env_id``."""
    names = []
    for name, src in pack_sources().items():
        if env_id is None or Manifest.read(src.folder).env == env_id:
            names.append(name)
    return sorted(names)


@functools.lru_cache(maxsize=64)
def _load(name: str, options: tuple[tuple[str, type, Any], ...]) -> Pack:
    sources = pack_sources()
    if name not in sources:
        raise PackError(f"unknown pack '{name}'; known packs: {', '.join(sorted(sources))}")
    src = sources[name]
    return load_folder(src.folder, origin=src.origin, **{k: v for k, _, v in options})


def load_pack(name: str, **options: Any) -> Pack:
    """Load (and cache) a pack by name; options go to procedural generators (``level=1``)."""
    # The type is part of the key: level=True equals level=1, and must not hit its cached pack.
    return _load(name, tuple(sorted((k, type(v), v) for k, v in options.items())))
