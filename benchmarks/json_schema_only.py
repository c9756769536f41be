"""The schema-only sweep: what grpo/JsonSchema-v0 pays answers built from the schema alone.

Every test task of ``extract`` (with its ``example=true`` variant, whose prompt also shows a
record) and ``bfcl`` is graded against each of the env's schema-only answers
(``JsonSchemaEnv.shallow_completions``: placeholders, range ends, enum ends, empty values,
defaults, the schema's own words, the text as every string, the shown example). Rewards use
the env's default weights; each is reported as a share of the maximum (the sum of the weights).

Printed per pack: the mean share over all (task, answer) pairs, the mean over tasks of the best
answer's share, the tasks some answer passes in full, and the mean share of each answer.
Run: ``python benchmarks/json_schema_only.py [--pack extract|bfcl|...] [--json]``.

Measured (shares of the maximum 1.1; pair mean / each task's best / tasks passed in full), with
this answer set: before the content gate extract 0.373 / 0.598 / 0, bfcl 1.0.0 0.484 / 0.692 /
15; after it extract 0.013 / 0.053 / 0, bfcl 1.1.0 0.012 / 0.066 / 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import envs  # noqa: E402, F401 - registers the env ids

ENV_ID = "grpo/JsonSchema-v0"
PACKS: dict[str, dict[str, Any]] = {
    "extract": {"pack": "extract"},
    "extract+example": {"pack": "extract", "example": True},
    "bfcl": {"pack": "bfcl"},
}


def sweep(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The sweep over one pack's test split (see the module doc)."""
    env = gym.make(ENV_ID, split="test", **kwargs).unwrapped
    top = sum(env.reward_weights.values())
    shares: list[float] = []
    best: list[float] = []
    per_answer: dict[str, list[float]] = defaultdict(list)
    passed: dict[str, list[str]] = {}
    for task_id in env.pack.ids("test"):
        task = env.pack.get(task_id)
        task_best = 0.0
        for name, completion in env.shallow_completions(task).items():
            reward, info = env.score(task, completion)
            share = reward / top
            shares.append(share)
            per_answer[name].append(share)
            task_best = max(task_best, share)
            if info["passed"]:
                passed.setdefault(task_id, []).append(name)
        best.append(task_best)
    return {
        "tasks": len(best),
        "max_reward": top,
        "mean_share": statistics.fmean(shares),
        "mean_best_share": statistics.fmean(best),
        "max_share": max(shares),
        "passed_in_full": passed,
        "per_answer": {k: statistics.fmean(v) for k, v in sorted(per_answer.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", choices=sorted(PACKS), action="append",
                        help="packs to sweep (default: all)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = {name: sweep(PACKS[name]) for name in args.pack or PACKS}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, r in results.items():
        top = r["max_reward"]
        print(f"{name}: {r['tasks']} test tasks, max reward {top:.2f}")
        print(f"  mean over (task, answer) pairs : {r['mean_share']:.3f} of the max "
              f"({r['mean_share'] * top:.2f} of {top:.2f})")
        print(f"  mean of each task's best answer: {r['mean_best_share']:.3f} of the max "
              f"({r['mean_best_share'] * top:.2f} of {top:.2f}); highest {r['max_share']:.3f}")
        print(f"  tasks passed in full           : {len(r['passed_in_full'])}")
        for task_id, names in sorted(r["passed_in_full"].items()):
            print(f"    {task_id}: {', '.join(names)}")
        worst = sorted(r["per_answer"].items(), key=lambda kv: -kv[1])
        print("  per answer: " + ", ".join(f"{k} {v:.3f}" for k, v in worst))


if __name__ == "__main__":
    main()
