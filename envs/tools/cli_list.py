"""``python -m envs list``: registered env ids and packs with version, split sizes and source.

Sizes and versions come from the pack index (``tasks.index``): a pack is loaded only when its
sources changed since the last listing, so the listing takes about a second.
"""

from __future__ import annotations

import importlib.util
import sys

import envs
from tasks import PackError, pack_sources
from tasks.index import index_path, pack_summaries

#: Env ids whose extra is not part of the core install: (module it imports, the pip command).
ENV_EXTRAS = {
    "grpo/OpenEnv-v0": ("openenv", 'pip install -e ".[openenv]"'),
    "grpo/ReasoningGym-v0": ("reasoning_gym", 'pip install -e ".[reasoning-gym]"'),
}


def missing_extra(env_id: str) -> str | None:
    """The pip command of an env's extra when it is not installed, else None."""
    if env_id not in ENV_EXTRAS:
        return None
    module, command = ENV_EXTRAS[env_id]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules (tests)
        found = False
    return None if found else command


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def pack_rows() -> list[list[str]]:
    """One row per pack: name, env, pack_version, sizes per split, source."""
    rows = []
    found = pack_sources()

    def progress(name: str) -> None:
        if not sys.stderr.isatty():  # a script's stderr stays for errors
            return
        print(f"(indexing pack {name}: once, until its sources change; {index_path()})",
              file=sys.stderr, flush=True)

    for name, summary in pack_summaries(progress=progress).items():
        origin = found[name].origin
        if isinstance(summary, Exception):  # e.g. the package that holds its data is missing
            first = str(summary).splitlines()[0]
            rows.append([name, "?", "-", f"unavailable: {first}", origin])
            continue
        sizes = ", ".join(f"{s} {_size(n)}" for s, n in summary.sizes.items())
        rows.append([name, summary.env, summary.version, sizes, origin])
    return rows


def _size(size: int | None) -> str:
    return "unbounded" if size is None else str(size)


def print_reasoning_gym(show_all: bool) -> None:
    from envs.domains.reasoning_gym.catalogue import list_rows, rg_version_carded

    rows, hidden = list_rows(show_all)
    missing = missing_extra("grpo/ReasoningGym-v0")
    state = f"NOT INSTALLED: {missing}; " if missing else ""
    print(f"\nreasoning-gym {rg_version_carded() or '?'} tasks ({state}grpo/ReasoningGym-v0 "
          "task=NAME; verdicts of their report cards)")
    if rows:
        print("\n".join(_table([["task", "kind", "card"], *rows])))
    if hidden:
        print(f"  ... and {hidden} tasks whose card fails (--all shows them, with the reason)")


def print_list(show_all: bool = False) -> int:
    print("Environments")
    env_rows = [["id", "source", "extra"]]
    for env_id, source in sorted(envs.env_sources().items()):
        missing = missing_extra(env_id)
        env_rows.append([env_id, source, f"not installed: {missing}" if missing else ""])
    print("\n".join(_table(env_rows)))
    print()
    print("Packs")
    try:
        rows = pack_rows()
    except PackError as exc:  # duplicate pack names: say which two, and fail
        print(f"error: {exc}")
        return 1
    print("\n".join(_table([["name", "env", "version", "tasks per split", "source"], *rows])))
    print_reasoning_gym(show_all)
    return 0
