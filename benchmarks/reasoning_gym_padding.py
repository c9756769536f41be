"""Padding gain: what a policy earns by hedging, under reasoning-gym's scorer and under ours.

    python benchmarks/reasoning_gym_padding.py                  # every task, 10 train items each
    python benchmarks/reasoning_gym_padding.py --tasks chain_sum countdown --n 20

Per task item, the same answers in each side's format: the gold; the gold padded with two other
items' golds (after, before, in a list); and two hedges (two answers, the gold first or last).
reasoning-gym's side is its own pipeline: ``extract_answer`` (the last ``<answer>`` block) then
the dataset's ``score_answer`` (its default, ``len(gold)/len(answer)`` for a gold inside a longer
answer, unless the task has its own). Ours is ``env.score`` on the completion in the prompt's
format (boxed for a number task). Prints, per completion kind, the mean reward and the share of
items paid anything on each side, over all tasks and per grading kind; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import envs  # noqa: E402, F401 - registers the envs
from envs.domains.reasoning_gym.generator import rg_version, task_names  # noqa: E402

KINDS = ("gold", "padded_after", "padded_before", "padded_list", "hedge_gold_first",
         "hedge_gold_last")


class _Late(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Late


def answers(gold: str, a: str, b: str) -> dict[str, list[str]]:
    """Kind -> the answer texts, one per ``<answer>`` block."""
    return {"gold": [gold], "padded_after": [f"{gold} {a} {b}"],
            "padded_before": [f"{a} {b} {gold}"], "padded_list": [f"{a}, {gold}, {b}"],
            "hedge_gold_first": [gold, a], "hedge_gold_last": [a, gold]}


def rg_reward(dataset: Any, entry: dict[str, Any], blocks: list[str]) -> float:
    from reasoning_gym.utils import extract_answer

    completion = " or ".join(f"<answer>{b}</answer>" for b in blocks)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        return float(dataset.score_answer(extract_answer(completion), entry))
    except Exception:  # noqa: BLE001 - a crashing upstream scorer pays nothing
        return 0.0
    finally:
        signal.alarm(0)


def measure(task: str, n: int) -> dict[str, dict[str, list[float]]]:
    env = gym.make("grpo/ReasoningGym-v0", task=task).unwrapped
    items = [env.pack.task_at("train", i) for i in range(n)]
    golds = [t["answer"] for t in items]
    out: dict[str, dict[str, list[float]]] = {"rg": defaultdict(list), "ours": defaultdict(list)}
    for i, item in enumerate(items):
        gold = golds[i]
        if gold is None:
            continue
        others = [g for g in golds[i + 1:] + golds[:i] if g is not None and g != gold]
        a, b = (others + ["12", "13"])[:2]
        for kind, blocks in answers(gold, a, b).items():
            out["rg"][kind].append(rg_reward(env.pack.generator.dataset, item["rg_entry"],
                                             blocks))
            ours = " or ".join(env.answer_in_format(x) for x in blocks)
            out["ours"][kind].append(env.score(item, ours)[0])
    env.close()
    return {side: dict(v) for side, v in out.items()} | {"kind": env.kind}


def summarise(rows: dict[str, Any], keep: Any = None) -> list[str]:
    lines = ["| completion | rg mean | rg paid | ours mean | ours paid |", "|---|---|---|---|---|"]
    for kind in KINDS:
        vals = {side: [v for t, r in rows.items() if keep is None or keep(r)
                       for v in r[side].get(kind, [])] for side in ("rg", "ours")}
        if not vals["rg"]:
            continue
        cells = []
        for side in ("rg", "ours"):
            v = vals[side]
            cells += [f"{sum(v) / len(v):.3f}", f"{sum(x > 0 for x in v) / len(v):.0%}"]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--n", type=int, default=10, help="train items per task (default 10)")
    parser.add_argument("--json", type=Path, help="write the per-task rewards here")
    args = parser.parse_args()
    rows: dict[str, Any] = {}
    for task in args.tasks or task_names():
        try:
            rows[task] = measure(task, args.n)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"{task}: skipped ({type(exc).__name__}: {exc})"[:200], file=sys.stderr)
    items = sum(len(r["rg"].get("gold", [])) for r in rows.values())
    print(f"reasoning-gym {rg_version()}: {len(rows)} tasks, {items} items, "
          f"`python benchmarks/reasoning_gym_padding.py --n {args.n}`\n")
    print("All tasks:")
    print("\n".join(summarise(rows)))
    for kind in ("number", "exact", "scorer"):
        print(f"\n{kind} tasks ({sum(r['kind'] == kind for r in rows.values())}):")
        print("\n".join(summarise(rows, lambda r, k=kind: r["kind"] == k)))
    paying = sorted(t for t, r in rows.items()
                    if any(v > 0 for k in KINDS[1:] for v in r["ours"].get(k, [])))
    print(f"\ntasks where ours pays a padded or hedged answer: {', '.join(paying) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
