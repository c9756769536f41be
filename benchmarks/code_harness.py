"""Gradings per second of the HumanEval references: the split harness (program and tests in
separate processes) against the shared-process harness it replaced, side by side in one run.

The old harness and the HumanEval loader it was graded with are read from git at
``--old-rev`` (the last commit with the shared-process design) into temporary modules; both run
through the same warm sandbox pool, with the same concurrency, alternating order round by
round (old, new, new, old, ...). Prints gradings/s per round and the ratio new/old of the
medians (the target is >= 0.7). Every grading must pass on both sides, or the run says so.

    python benchmarks/code_harness.py [--rounds 4] [--concurrency 2] [--old-rev f709d51]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

from sandbox import Sandbox
from sandbox.harness import run_tests
from tasks import load_pack

ROOT = Path(__file__).resolve().parent.parent
OLD_REV = "f709d51"  # the baseline side: the revision with the shared-process harness


def _module_from_git(rev: str, path: str, name: str, folder: Path) -> ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    file = folder / f"{name}.py"
    file.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _old_jobs(rev: str, folder: Path) -> list[tuple[str, list[str], str]]:
    """(program, tests, setup) per HumanEval task as the old loader built them."""
    loader = _module_from_git(rev, "tasks/humaneval/__init__.py", "old_humaneval", folder)
    splits = loader.load()
    rows = splits["train"] + splits["test"]
    return [(r["prelude"] + r["canonical_solution"], r["tests"], r["setup"]) for r in rows]


def _new_jobs() -> list[tuple[str, list[str], str, list[str]]]:
    pack = load_pack("humaneval")
    tasks = [pack.get(i) for i in pack.ids("train") + pack.ids("test")]
    return [(t["prelude"] + t["canonical_solution"], t["tests"], t["setup"],
             [t["entry_point"]]) for t in tasks]


def _rate(grade: Callable[[tuple], bool], jobs: list[tuple], concurrency: int
          ) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        ok = list(ex.map(grade, jobs))
    return len(jobs) / (time.perf_counter() - start), ok.count(False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--old-rev", default=OLD_REV)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Sandbox(pool_size=args.concurrency) as sb:
        old_harness = _module_from_git(args.old_rev, "sandbox/harness.py", "old_harness",
                                       Path(tmp))
        old_jobs, new_jobs = _old_jobs(args.old_rev, Path(tmp)), _new_jobs()

        def old(job: tuple) -> bool:
            program, tests, setup = job
            report = old_harness.run_tests(sb, program, tests, setup=setup)
            return report.passed == list(range(len(tests)))

        def new(job: tuple) -> bool:
            program, tests, setup, names = job
            report = run_tests(sb, program, tests, setup=setup, entry_points=names)
            return report.passed == list(range(len(tests)))

        sb.warm()
        print(f"HumanEval references: {len(new_jobs)} tasks, {sum(len(j[1]) for j in new_jobs)} "
              f"cases; concurrency {args.concurrency}; old harness from {args.old_rev}")
        _rate(new, new_jobs[:8], args.concurrency)  # warm-up of both code paths
        _rate(old, old_jobs[:8], args.concurrency)
        rates: dict[str, list[float]] = {"old": [], "new": []}
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for side in order:
                grade, jobs = (old, old_jobs) if side == "old" else (new, new_jobs)
                rate, failed = _rate(grade, jobs, args.concurrency)
                rates[side].append(rate)
                note = f"  ({failed} did not pass!)" if failed else ""
                print(f"round {r + 1}  {side}: {rate:6.2f} gradings/s{note}", flush=True)
        old_m, new_m = statistics.median(rates["old"]), statistics.median(rates["new"])
        print(f"median: old {old_m:.2f}/s, new {new_m:.2f}/s, new/old = {new_m / old_m:.2f} "
              "(target >= 0.7)")


if __name__ == "__main__":
    sys.exit(main())
