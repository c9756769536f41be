"""``python -m envs list``: registered env ids and packs with version, split sizes and source."""

from __future__ import annotations

import envs
from tasks import PackError, load_pack, pack_sources


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def pack_rows() -> list[list[str]]:
    """One row per pack: name, env, pack_version, sizes per split, source."""
    rows = []
    for name, src in sorted(pack_sources().items()):
        try:
            pack = load_pack(name)
            sizes = ", ".join(f"{s} {_size(pack.size(s))}" for s in pack.splits)
            rows.append([name, pack.env, pack.pack_version, sizes, src.origin])
        except PackError as exc:  # e.g. the package that holds its data is not installed
            first = str(exc).splitlines()[0]
            rows.append([name, "?", "-", f"unavailable: {first}", src.origin])
    return rows


def _size(size: int | None) -> str:
    return "unbounded" if size is None else str(size)


def print_reasoning_gym(show_all: bool) -> None:
    from envs.reasoning_gym.catalogue import list_rows, rg_version_carded

    rows, hidden = list_rows(show_all)
    print(f"\nreasoning-gym {rg_version_carded() or '?'} tasks (grpo/ReasoningGym-v0 task=NAME; "
          "verdicts of their report cards)")
    if rows:
        print("\n".join(_table([["task", "kind", "card"], *rows])))
    if hidden:
        print(f"  ... and {hidden} tasks whose card fails (--all shows them, with the reason)")


def print_list(show_all: bool = False) -> int:
    print("Environments")
    env_rows = [["id", "source"]]
    env_rows += [[env_id, source] for env_id, source in sorted(envs.env_sources().items())]
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
