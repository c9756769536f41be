"""Per-answer cost of reasoning-gym's scorer path (grpo/ReasoningGym-v0, scorer tasks).

Scores N answers (the gold and a wrong one, alternating) on countdown, polynomial_multiplication
and sudoku through ``env.score`` (grammar check, a fresh confined child per answer) and, side by
side, through reasoning-gym's own ``score_answer`` called in this process (no isolation), and
prints the mean wall time per answer and the ratio, after a warm-up that starts the worker and
builds the datasets. Run: ``python benchmarks/rg_scorer_cost.py [N]``.
"""

from __future__ import annotations

import sys
import time

import gymnasium as gym

import envs  # noqa: F401 - registers the envs


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    for task in ("countdown", "polynomial_multiplication", "sudoku"):
        env = gym.make("grpo/ReasoningGym-v0", task=task).unwrapped
        items = [env.pack.task_at("train", i) for i in range(4)]
        env.score(items[0], env.gold_completion(items[0]))  # warm-up: worker and dataset
        own = env.pack.generator.dataset.score_answer
        paid = 0
        start = time.perf_counter()
        for i in range(n):
            item = items[i % len(items)]
            text = env.gold_completion(item) if i % 2 == 0 else env.answer_in_format("1")
            paid += env.score(item, text)[0] > 0
        per = (time.perf_counter() - start) / n
        start = time.perf_counter()
        for i in range(n):
            item = items[i % len(items)]
            own(item["answer"] if i % 2 == 0 else "1", item["rg_entry"])
        direct = (time.perf_counter() - start) / n
        print(f"{task:28s} env.score {per * 1000:7.1f} ms/answer  reasoning-gym in-process "
              f"{direct * 1000:6.2f} ms  ratio {per / direct:6.1f}x  (golds paid {paid}/"
              f"{(n + 1) // 2})", flush=True)


if __name__ == "__main__":
    main()
