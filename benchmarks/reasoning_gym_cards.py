"""Every reasoning-gym task's report card (not in CI): writes envs/domains/reasoning_gym/cards.json,
which ``python -m envs list`` reads, and the README's generated table.

    python benchmarks/reasoning_gym_cards.py                 # all tasks, 30 test tasks each
    python benchmarks/reasoning_gym_cards.py --tasks chain_sum countdown --n 12 --no-write
    python benchmarks/reasoning_gym_cards.py --readme-only   # redraw the README table
    python benchmarks/reasoning_gym_cards.py --start-at maze # resume a stopped run at maze

Each task's row is written as soon as its card ends, so a stopped run keeps what it did; a run
with ``--tasks`` or ``--start-at`` updates its rows and keeps the others.

Each task's env is made with the generator's defaults (no level) over its fixed test set; its
card (``envs.tools.card.run_card``: oracle max, floor gap, canaries, determinism, shallow baselines,
latency, errors) runs beside the padding check (``catalogue.padded``: the gold among other
candidates must earn nothing). A task whose card raises or runs past ``--limit`` seconds fails
with that reason.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from envs.domains.reasoning_gym.catalogue import CARDS  # noqa: E402
from envs.domains.reasoning_gym.generator import rg_version, task_names  # noqa: E402
from envs.tools.card.reasoning_gym import run_task_card  # noqa: E402

README = ROOT / "README.md"
START, END = "<!-- reasoning-gym:start -->", "<!-- reasoning-gym:end -->"


class _Late(BaseException):  # not an Exception: the graders catch those and go on
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Late


def card_of(task: str, n: int, limit: int) -> dict[str, Any]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    start = time.perf_counter()
    try:
        row = run_task_card(task, n_tasks=n)
        row.pop("card", None)
    except _Late:
        row = {"ok": False, "kind": "?", "reason": f"card ran past {limit} s", "summary": ""}
    except Exception as exc:  # noqa: BLE001 - an upstream generator may raise anything
        row = {"ok": False, "kind": "?", "summary": "",
               "reason": f"card raised {type(exc).__name__}: {exc}"[:300]}
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def table(data: dict[str, Any]) -> str:
    rows = data["tasks"]
    passing = sorted(t for t, r in rows.items() if r["ok"])
    lines = [START,
             f"**{len(passing)} of {len(rows)} reasoning-gym {data['reasoning_gym']} tasks pass "
             "their report card** (generator defaults, 30 test tasks each; "
             "`python benchmarks/reasoning_gym_cards.py`). A failing task is hidden from "
             "`python -m envs list` (`--all` shows it, with the reason).",
             "", "<details><summary>Every task and its verdict</summary>", "",
             "| task | kind | verdict |", "|---|---|---|"]
    for task in sorted(rows):
        r = rows[task]
        verdict = "pass" if r["ok"] else "fail: " + r["reason"].replace("|", "/")
        lines.append(f"| {task} | {r.get('kind', '?')} | {verdict} |")
    lines += ["", "</details>", END]
    return "\n".join(lines)


def write_readme(data: dict[str, Any]) -> None:
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    README.write_text(pattern.sub(lambda _: table(data), text, count=1), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", help="task names (default: all)")
    parser.add_argument("--n", type=int, default=30, help="test tasks per card (default 30)")
    parser.add_argument("--limit", type=int, default=300, help="seconds per card (default 300)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--readme-only", action="store_true")
    parser.add_argument("--start-at", metavar="TASK",
                        help="skip the tasks before TASK in the run's order (resume a run)")
    args = parser.parse_args()
    if args.readme_only:
        write_readme(json.loads(CARDS.read_text(encoding="utf-8")))
        return 0
    names = args.tasks or task_names()
    if args.start_at is not None:
        if args.start_at not in names:
            parser.error(f"--start-at {args.start_at!r} is not among the run's tasks")
        names = names[names.index(args.start_at):]
    data = {"reasoning_gym": rg_version(), "n_tasks": args.n, "tasks": {}}
    if (args.tasks or args.start_at) and CARDS.is_file():  # a partial run updates its rows
        data["tasks"] = json.loads(CARDS.read_text(encoding="utf-8"))["tasks"]
    for task in names:
        row = card_of(task, args.n, args.limit)
        data["tasks"][task] = row
        print(f"{task:28s} {'pass' if row['ok'] else 'FAIL'} {row['seconds']:6.1f}s "
              f"{row.get('kind', '?'):6s} {row['reason'][:150]}", flush=True)
        if not args.no_write:
            CARDS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    ok = sum(r["ok"] for r in data["tasks"].values())
    print(f"{ok} of {len(data['tasks'])} tasks pass their card")
    if not args.no_write:
        write_readme(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
