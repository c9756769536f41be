"""Shallow programs over every task of a code pack's split, through the real sandbox.

Each task gets every program of ``envs.domains.code_tests.task_baselines`` (its families: constants, the
shown answers, the prompt's literal strings, simple transforms of each argument, and for
``strict_baselines`` records the arithmetic transforms), graded as ``trivially_passed`` grades
them (the hidden cases, in one sandbox run per task). Prints per pack: the tasks some program
passes in full (and which), the tasks where one earns >= 0.5 of the graded cases, and the mean
over tasks of the best program's fraction ("best-baseline mean").

With ``--other-examples``, each task paid in full that shows one assert as its example (MBPP)
is tried again with each other assert shown instead, and the first that leaves no program
paying in full is printed (what ``tasks.mbpp.EXAMPLE_INDEX`` records).

    python benchmarks/code_shallow_sweep.py [--packs humaneval mbpp pyfunc] [--split test]
        [--pool 2] [--other-examples] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.domains.code_tests import CodeTestsEnv  # noqa: E402
from sandbox import Sandbox  # noqa: E402
from tasks import Task  # noqa: E402


def sweep_pack(env: CodeTestsEnv, split: str) -> dict:
    """Per task of ``split``: the best shallow program and its fraction, and the summary."""
    tasks = [env.pack.get(i) for i in env.pack.ids(split)]
    with ThreadPoolExecutor(max(1, env.sandbox.pool_size)) as ex:
        scores = list(ex.map(env.baseline_scores, tasks))
    per_task = {}
    for task, score in zip(tasks, scores, strict=True):
        best = max(score.values())
        per_task[task.id] = {"best": best, "by": sorted(n for n, s in score.items() if s == best)
                             if best > 0 else [], "n_programs": len(score)}
    bests = [t["best"] for t in per_task.values()]
    return {
        "n_tasks": len(tasks),
        "paid_in_full": {tid: t["by"] for tid, t in per_task.items() if t["best"] == 1.0},
        "at_least_half": sum(b >= 0.5 for b in bests),
        "best_mean": statistics.fmean(bests) if bests else 0.0,
        "tasks": per_task,
    }


def other_example(env: CodeTestsEnv, task: Task) -> int | None:
    """The first index of an assert that, shown as the example instead, leaves no shallow
    program paying ``task`` in full; None if none does."""
    tests = list(task["tests"])
    for j, test in enumerate(tests):
        if [test] == list(task.fields.get("shown_tests") or []):
            continue
        moved = Task(task.id, task.split, {**task.fields, "example": test, "shown_tests": [test]})
        if max(env.baseline_scores(moved).values()) < 1.0:
            return j
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", nargs="+", default=["humaneval", "mbpp", "pyfunc"])
    parser.add_argument("--split", default="test")
    parser.add_argument("--pool", type=int, default=2, help="sandbox containers at once")
    parser.add_argument("--other-examples", action="store_true",
                        help="for a task paid in full, look for another assert to show")
    parser.add_argument("--json", type=Path, help="write every task's result here")
    args = parser.parse_args(argv)
    results = {}
    with Sandbox(pool_size=args.pool) as sandbox:
        for pack in args.packs:
            start = time.monotonic()
            env = CodeTestsEnv(pack=pack, split=args.split, sandbox=sandbox)
            result = results[pack] = sweep_pack(env, args.split)
            print(f"{pack} ({env.pack.pack_version}, {args.split}): {result['n_tasks']} tasks, "
                  f"{len(result['paid_in_full'])} paid in full, {result['at_least_half']} with "
                  f"some program >= 0.5, best-baseline mean {result['best_mean']:.3f} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
            for tid, names in result["paid_in_full"].items():
                task = env.pack.get(tid)
                moved = (other_example(env, task) if args.other_examples and "example" in
                         task.fields else None)
                hint = "" if moved is None else f"  (showing assert {moved} instead defeats them)"
                print(f"  {tid}: {' | '.join(names[:4])}{hint}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
