"""Per-answer cost of reasoning-gym's scorer path (grpo/ReasoningGym-v0, scorer tasks).

Scores N answers (the gold and a wrong one, alternating) on countdown, polynomial_multiplication
and sudoku through ``env.score`` (grammar check, a fresh confined child per answer), once with a
child forked per answer and once with the pre-forked spare child (the default), and, side by
side, through reasoning-gym's own ``score_answer`` called in this process (no isolation); prints
the median wall time per answer and the ratios (the two workers take turns, 10 answers
back to back each), after a warm-up that starts each worker and builds
the datasets. Run: ``python benchmarks/rg_scorer_cost.py [N]``.
"""

from __future__ import annotations

import statistics
import sys
import time

import gymnasium as gym

import envs  # noqa: F401 - registers the envs

#: Answers each worker scores back to back before the other takes its turn.
BLOCK = 10


def main() -> None:
    from envs.domains.reasoning_gym import grading
    from envs.domains.reasoning_gym.scorer_worker import ScorerWorker

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    workers = {"fork per answer": ScorerWorker(prefork=False), "pre-forked": ScorerWorker()}
    for task in ("countdown", "polynomial_multiplication", "sudoku"):
        env = gym.make("grpo/ReasoningGym-v0", task=task).unwrapped
        items = [env.pack.task_at("train", i) for i in range(4)]
        times: dict[str, list[float]] = {mode: [] for mode in workers}
        paid = dict.fromkeys(workers, 0)
        for worker in workers.values():
            grading.WORKER = worker
            env.score(items[0], env.gold_completion(items[0]))  # warm-up: worker and dataset
        # The two workers in turn, BLOCK answers back to back each (so the spare is forked while
        # the next answer comes, as in a training loop), over the same answers and load.
        for first in range(0, n, BLOCK):
            for mode, worker in workers.items():
                grading.WORKER = worker
                for i in range(first, min(first + BLOCK, n)):
                    item = items[i % len(items)]
                    text = env.gold_completion(item) if i % 2 == 0 else env.answer_in_format("1")
                    start = time.perf_counter()
                    paid[mode] += env.score(item, text)[0] > 0
                    times[mode].append(time.perf_counter() - start)
        assert set(paid.values()) == {(n + 1) // 2}, (task, paid)
        per = {mode: statistics.median(t) for mode, t in times.items()}
        own = env.pack.generator.dataset.score_answer
        start = time.perf_counter()
        for i in range(n):
            item = items[i % len(items)]
            own(item["answer"] if i % 2 == 0 else "1", item["rg_entry"])
        direct = (time.perf_counter() - start) / n
        fork, spare = per["fork per answer"], per["pre-forked"]
        print(f"{task:26s} env.score median: fork per answer {fork * 1000:6.1f} ms, pre-forked "
              f"{spare * 1000:6.1f} ms/answer ({fork / spare:4.2f}x faster); reasoning-gym "
              f"in-process {direct * 1000:6.2f} ms (pre-forked {spare / direct:5.1f}x that); "
              f"golds paid {(n + 1) // 2}/{(n + 1) // 2} both ways", flush=True)
    for worker in workers.values():
        worker.close()


if __name__ == "__main__":
    main()
