"""Every reasoning-gym gold in its task's answer form (``envs/domains/reasoning_gym/answer_forms.py``), on
more golds than the test checks: N per task at the generator's defaults, at level 1 and at the
task's last level (not in CI; a config whose generator runs past --limit seconds is skipped).

    python benchmarks/rg_forms_golds.py [N] [--limit SECONDS] [--tasks NAME ...]

Prints, per task, the golds checked and any refused (the form is then too strict: fix it).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from envs.domains.reasoning_gym.answer_forms import FORMS  # noqa: E402
from envs.domains.reasoning_gym.answer_grammar import Refused  # noqa: E402
from envs.domains.reasoning_gym.generator import level_config, level_count, make_dataset  # noqa: E402


class _Late(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Late


def configs(task: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    n = level_count(task)
    for level in sorted({1, n}) if n else ():
        try:
            out.append((f"level {level}", level_config(task, level)))
        except Exception as exc:  # noqa: BLE001 - an upstream curriculum may raise anything
            print(f"  {task} level {level}: {type(exc).__name__}: {exc}"[:160])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=50, help="golds per config (default 50)")
    parser.add_argument("--limit", type=int, default=60, help="seconds per config (default 60)")
    parser.add_argument("--tasks", nargs="*", help="task names (default: every task with a form)")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    total = refused = 0
    for task in args.tasks or sorted(FORMS):
        checked, bad, start = 0, [], time.perf_counter()
        for name, config in configs(task):
            signal.alarm(args.limit)
            try:
                dataset = make_dataset(task, config, seed=0, size=args.n)
                for i in range(args.n):
                    gold = dataset[i]["answer"]
                    if gold is None:
                        continue
                    checked += 1
                    try:
                        FORMS[task](str(gold))
                    except Refused as exc:
                        bad.append((name, str(gold)[:80], str(exc)))
            except _Late:
                print(f"  {task} {name}: generator ran past {args.limit} s, skipped")
            except Exception as exc:  # noqa: BLE001
                print(f"  {task} {name}: {type(exc).__name__}: {exc}"[:160])
            finally:
                signal.alarm(0)
        total, refused = total + checked, refused + len(bad)
        print(f"{task:26s} {checked:5d} golds, {len(bad)} refused "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
        for row in bad[:5]:
            print("   ", row)
    print(f"{total - refused} of {total} golds in their form")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
