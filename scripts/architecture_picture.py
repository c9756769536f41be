"""Draw the rooms of the code and the imports between them (docs/architecture.png).

    python scripts/architecture_picture.py [--before REV] [--out docs/architecture.png]

Each box is a room (a layer of ``tests/test_import_graph.py``'s ``LAYERS``, envs/ split into
its rooms), with its lines of Python; each arrow is the imports from one room to another, with
their count. An arrow that runs up the order of layers is red. With ``--before REV`` a left
panel draws the same for the tree at REV (envs/ as it was then: one flat room and its folders),
each box placed at the floor its code has now.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_import_graph import LAYERS, import_graph, project_modules  # noqa: E402

PACKAGES = ("envs", "sandbox", "tasks", "learner")

# Before the re-layout: envs/'s folders and its flat top level, each at the floor
# its code sits on now (the flat room held contract, domains, tools and the CLI at once).
BEFORE_ROOMS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("envs/card", 0, ("envs.card",)),
    ("envs/integrations", 0, ("envs.integrations",)),
    ("envs/openenv_server", 0, ("envs.openenv_server",)),
    ("learner/", 1, ("learner",)),
    ("envs/reasoning_gym", 2, ("envs.reasoning_gym",)),
    ("envs/openenv_client", 2, ("envs.openenv_client",)),
    ("envs/recipes", 2, ("envs.recipes",)),
    ("envs/*.py (flat)", 3, ("envs",)),
    ("envs/verify", 6, ("envs.verify",)),
    ("sandbox/", 6, ("sandbox",)),
    ("tasks/", 7, ("tasks",)),
)
AFTER_NAMES = {"tools": "envs/tools", "learner": "learner/", "domains": "envs/domains",
               "contract": "envs/*.py (contract)", "grading": "envs/grading.py",
               "vocabulary": "envs/contract.py,\nflags, perturb"}


def after_rooms() -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    out = []
    for rank, (name, prefixes) in enumerate(LAYERS):
        if name == "verify, sandbox":
            out += [("envs/verify", rank, ("envs.verify",)), ("sandbox/", rank, ("sandbox",))]
        else:
            out.append((AFTER_NAMES.get(name, name + "/"), rank, prefixes))
    return tuple(out)


def room_of(module: str, rooms) -> tuple[str, int] | None:
    best = None
    for name, rank, prefixes in rooms:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), name, rank)
    return None if best is None else (best[1], best[2])


def measure(root: Path, rooms):
    """(lines per room, {(from room, to room): imports}, rank per room)."""
    modules = project_modules(root, PACKAGES)
    graph = import_graph(root, PACKAGES)
    lines: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    for module, path in modules.items():
        mine = room_of(module, rooms)
        if mine is None:
            continue
        lines[mine[0]] += len(path.read_text(encoding="utf-8").splitlines())
        for target in graph[module]:
            theirs = room_of(target, rooms)
            if theirs and theirs[0] != mine[0]:
                edges[(mine[0], theirs[0])] += 1
    ranks = {name: rank for name, rank, _ in rooms}
    return lines, edges, ranks


def tree_at(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev, *PACKAGES], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def draw(ax, title: str, lines, edges, ranks) -> None:
    by_rank: dict[int, list[str]] = {}
    for name, rank in ranks.items():
        if lines[name]:
            by_rank.setdefault(rank, []).append(name)
    pos = {}
    for rank, names in by_rank.items():
        for i, name in enumerate(names):
            # a lone box zigzags, so that arrows past it do not run through it
            x = 0.3 + 0.4 * (rank % 2) if len(names) == 1 else (i + 1) / (len(names) + 1)
            pos[name] = (x, 1 - (rank + 0.5) / (max(ranks.values()) + 1))
    envs_total = sum(v for k, v in lines.items() if k.startswith("envs"))
    for (a, b), n in sorted(edges.items()):
        if a not in pos or b not in pos:
            continue
        up = ranks[b] < ranks[a]
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle="-|>", color="crimson" if up else "0.55",
                                    lw=0.6 + 0.25 * min(n, 12), shrinkA=16, shrinkB=16,
                                    connectionstyle="arc3,rad=0.12"))
        mx, my = (pos[a][0] + pos[b][0]) / 2, (pos[a][1] + pos[b][1]) / 2
        ax.text(mx, my, str(n), fontsize=6, color="crimson" if up else "0.35", ha="center")
    for name, (x, y) in pos.items():
        share = f", {100 * lines[name] / envs_total:.0f}% of envs" if name.startswith("envs") else ""
        ax.text(x, y, f"{name}\n{lines[name]:,} lines{share}", ha="center", va="center",
                fontsize=7, bbox=dict(boxstyle="round", fc="#eef4fb" if name.startswith("envs")
                                      else "#f4f4f4", ec="0.4"))
    ups = sum(n for (a, b), n in edges.items() if ranks[b] < ranks[a])
    ax.set_title(f"{title}\n(arrows: imports between rooms; red: {ups} up the layers)",
                 fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", help="also draw the tree at this revision")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "architecture.png")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            panels.append((f"before ({args.before[:7]})",
                           *measure(tree_at(args.before, Path(tmp)), BEFORE_ROOMS)))
    panels.append(("after", *measure(ROOT, after_rooms())))
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 8))
    for ax, (title, lines, edges, ranks) in zip(
            axes if len(panels) > 1 else [axes], panels, strict=True):
        draw(ax, title, lines, edges, ranks)
        for name in sorted(lines, key=lambda k: -lines[k]):
            print(f"{title:12s} {name.replace(chr(10), ' '):28s} {lines[name]:6d}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
