"""The memorised-benchmark hack on every HumanEval and MBPP task, before and after the amplified
hidden tests (``tasks.amplify``): a program that answers the task's public test cases from a
lookup table and returns their most common answer for any other input (``--fallbacks``: or
another answer, ``FALLBACKS``). HumanEval's and MBPP's
tests are public, so a model may have memorised them. Graded by the real judge in the sandbox,
once with the task's own cases only and once with its amplified ones appended; prints the tasks
it passes in full each way, and those where it earns over half the reward (the shallow share).

    python benchmarks/code_lookup_hack.py [--packs humaneval mbpp] [--pool 2]
        [--fallbacks common nearest type_default echo_or_sorted]
"""

from __future__ import annotations

import argparse
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

#: What the lookup program answers on an input its table lacks (a name -> the body's last
#: statement; ``common`` is the table's most common answer): the first is the hack the issue
#: names, the others are variants tried against the fix.
FALLBACKS = {
    "common": "return _TABLE.get(key, {common})",
    # the answer of the known input most like this one (a mutated input often keeps it)
    "nearest": ("if key in _TABLE:\n        return _TABLE[key]\n"
                "    import difflib\n"
                "    near = max(_TABLE, key=lambda k: difflib.SequenceMatcher(None, k, key).ratio())\n"
                "    return _TABLE[near]"),
    # the answer type's empty value (0, '', [], False)
    "type_default": "return _TABLE[key] if key in _TABLE else type({common})()",
    # the first argument where it has the answer's type, a transform that may raise, else
    # the common answer
    "echo_or_sorted": ("try:\n        return _TABLE[key]\n    except KeyError:\n        pass\n"
                       "    try:\n        if type(args[0]) is type({common}):\n"
                       "            return args[0]\n        return sorted(args[0])\n"
                       "    except Exception:\n        return {common}"),
}


def lookup_program(task: Task, tests: list[str], fallback: str = "common") -> str | None:
    """A program answering every ``assert f(literals) == literal`` case of ``tests`` from a
    table (keyed by ``str`` of the arguments), and ``FALLBACKS[fallback]`` otherwise; None
    when no case has that form."""
    entry = task["entry_point"] if isinstance(task["entry_point"], str) else task["entry_point"][0]
    # repr of an argument tuple is its str: the program below keys by str(args)
    table = amplify.case_table(tests, {"candidate", entry})
    if not table:
        return None
    common = Counter(repr(v) for v in table.values()).most_common(1)[0][0]
    body = FALLBACKS[fallback].format(common=common)
    return (f"_TABLE = {{k: v for k, v in {list(table.items())!r}}}\n\n\n"
            f"def {entry}(*args):\n"
            f"    key = str(args)\n"
            f"    {body}\n")


def hack_completion(task: Task, tests: list[str], fallback: str = "common") -> str | None:
    program = lookup_program(task, tests, fallback)
    return None if program is None else f"```python\n{program}```\n"


def measure(env: Any, task: Task, own: list[str], fallback: str = "common"
            ) -> dict[str, Any] | None:
    completion = hack_completion(task, own, fallback)
    if completion is None:
        return None
    before = Task(task.id, task.split, {**task.fields, "tests": own})
    _, info_before = env.score(before, completion)
    _, info_after = env.score(task, completion)
    return {"before": bool(info_before["passed"]), "after": bool(info_after["passed"]),
            "after_share": info_after["rewards"]["tests"]}


def run(pack: str, pool: int, fallback: str = "common") -> dict[str, Any]:
    module = __import__(f"tasks.{pack}", fromlist=["records"])
    own = {r["id"]: list(r["tests"]) for _, r in module.records()}
    with Sandbox(pool_size=pool) as sandbox:
        env = gym.make("grpo/CodeTests-v0", pack=pack, split="all", sandbox=sandbox).unwrapped
        ids = env.pack.ids("train") + env.pack.ids("test")
        tasks = [env.pack.get(i) for i in ids]
        with ThreadPoolExecutor(pool) as ex:
            results = list(ex.map(lambda t: measure(env, t, own[t.id.split("/", 1)[1]],
                                                    fallback), tasks))
    graded = [(t.id, r) for t, r in zip(tasks, results, strict=True) if r is not None]
    return {"fallback": fallback, "tasks": len(tasks), "hack_written": len(graded),
            "paid_in_full_own_cases": sum(r["before"] for _, r in graded),
            "paid_in_full_amplified": sum(r["after"] for _, r in graded),
            "over_half_amplified": sum(r["after_share"] > 0.5 for _, r in graded),
            "mean_share_amplified": round(sum(r["after_share"] for _, r in graded)
                                          / max(1, len(graded)), 4),
            "still_paid": [tid for tid, r in graded if r["after"]],
            "still_over_half": [tid for tid, r in graded if r["after_share"] > 0.5]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", nargs="+", default=["humaneval", "mbpp"])
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--fallbacks", nargs="+", default=["common"], choices=list(FALLBACKS))
    args = parser.parse_args(argv)
    for pack, fallback in ((p, f) for p in args.packs for f in args.fallbacks):
        start = time.monotonic()
        result = run(pack, args.pool, fallback)
        result["seconds"] = round(time.monotonic() - start, 1)
        print(json.dumps({pack: result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
