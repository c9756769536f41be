"""The memorised-benchmark hack on every HumanEval and MBPP task, before and after the amplified
hidden tests (``tasks.amplify``): a program that answers the task's public test cases from a
lookup table and returns their most common answer for any other input. HumanEval's and MBPP's
tests are public, so a model may have memorised them. Graded by the real judge in the sandbox,
once with the task's own cases only and once with its amplified ones appended; prints the tasks
it passes in full each way.

    python benchmarks/code_lookup_hack.py [--packs humaneval mbpp] [--pool 2]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym  # noqa: E402

import envs  # noqa: E402,F401 - registers the envs
from sandbox import Sandbox  # noqa: E402
from tasks import Task, amplify  # noqa: E402


def lookup_program(task: Task, tests: list[str]) -> str | None:
    """A program answering every ``assert f(literals) == literal`` case of ``tests`` from a
    table, and the most common answer otherwise; None when no case has that form."""
    entry = task["entry_point"] if isinstance(task["entry_point"], str) else task["entry_point"][0]
    call_names = {"candidate", entry}
    table: dict[str, Any] = {}
    for case in tests:
        try:
            node = ast.parse(case).body[-1]
        except SyntaxError:
            continue
        test = node.test if isinstance(node, ast.Assert) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq) and isinstance(test.left, ast.Call)
                and isinstance(test.left.func, ast.Name) and test.left.func.id in call_names):
            continue
        args = amplify.literal_args(test.left)
        try:
            want = ast.literal_eval(test.comparators[0])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if args is not None:
            table[repr(args)] = want
    if not table:
        return None
    common = Counter(repr(v) for v in table.values()).most_common(1)[0][0]
    return (f"_TABLE = {{k: v for k, v in {list(table.items())!r}}}\n\n\n"
            f"def {entry}(*args):\n"
            f"    return _TABLE.get(repr(args), {common})\n")


def hack_completion(task: Task, tests: list[str]) -> str | None:
    program = lookup_program(task, tests)
    return None if program is None else f"```python\n{program}```\n"


def measure(env: Any, task: Task, own: list[str]) -> dict[str, Any] | None:
    completion = hack_completion(task, own)
    if completion is None:
        return None
    before = Task(task.id, task.split, {**task.fields, "tests": own})
    _, info_before = env.score(before, completion)
    _, info_after = env.score(task, completion)
    return {"before": bool(info_before["passed"]), "after": bool(info_after["passed"]),
            "after_share": info_after["rewards"]["tests"]}


def run(pack: str, pool: int) -> dict[str, Any]:
    module = __import__(f"tasks.{pack}", fromlist=["records"])
    own = {r["id"]: list(r["tests"]) for _, r in module.records()}
    with Sandbox(pool_size=pool) as sandbox:
        env = gym.make("grpo/CodeTests-v0", pack=pack, split="all", sandbox=sandbox).unwrapped
        ids = env.pack.ids("train") + env.pack.ids("test")
        tasks = [env.pack.get(i) for i in ids]
        with ThreadPoolExecutor(pool) as ex:
            results = list(ex.map(lambda t: measure(env, t, own[t.id.split("/", 1)[1]]), tasks))
    graded = [(t.id, r) for t, r in zip(tasks, results, strict=True) if r is not None]
    return {"tasks": len(tasks), "hack_written": len(graded),
            "paid_in_full_own_cases": sum(r["before"] for _, r in graded),
            "paid_in_full_amplified": sum(r["after"] for _, r in graded),
            "still_paid": [tid for tid, r in graded if r["after"]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", nargs="+", default=["humaneval", "mbpp"])
    parser.add_argument("--pool", type=int, default=2)
    args = parser.parse_args(argv)
    for pack in args.packs:
        start = time.monotonic()
        result = run(pack, args.pool)
        result["seconds"] = round(time.monotonic() - start, 1)
        print(json.dumps({pack: result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
