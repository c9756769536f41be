"""Grading throughput of HumanEval reference solutions: local, on Ray with one node, on Ray with
two nodes (all on this machine), side by side in one run.

Each side runs in a fresh process, in alternating order over ``--rounds``: it builds
``grpo/CodeTests-v0``, starts its grading (the local sandbox pool; or a Ray test cluster of one
node with every CPU, or two nodes sharing them, with one grading actor per node), grades one
warm-up batch, then times ``learner.sampling.scoring.score_all`` over every HumanEval gold completion
(``env.gold_completion``), checking that each one passes. Prints gradings/s per side (median
of the rounds) and the ratio to local grading.

    python benchmarks/ray_grading.py [--tasks 164] [--rounds 2]

On one machine Ray cannot add CPUs: the figures show what the Ray path costs against local
grading on the same cores; on a cluster each added node brings its own cores and engine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIDES = ("local", "ray-1-node", "ray-2-nodes")


def run_side(side: str, n_tasks: int) -> dict[str, float]:
    import gymnasium as gym

    import envs  # noqa: F401
    from learner.sampling.scoring import score_all

    env = gym.make("grpo/CodeTests-v0").unwrapped
    tasks = [env.pack.get(f"humaneval/{i}") for i in range(n_tasks)]
    golds = [env.gold_completion(t) for t in tasks]
    t0 = time.perf_counter()
    scorer, cluster = None, None
    if side != "local":
        from ray.cluster_utils import Cluster

        from envs.ray_scoring import RayScorer

        cpus = os.cpu_count() or 1
        per_node = [cpus] if side == "ray-1-node" else [max(1, cpus // 2)] * 2
        node = dict(resources={"docker": 1}, object_store_memory=100 << 20)
        cluster = Cluster(initialize_head=True, head_node_args={
            **node, "num_cpus": per_node[0], "include_dashboard": False})
        for n in per_node[1:]:
            cluster.add_node(**node, num_cpus=n)
        cluster.wait_for_nodes()
        scorer = RayScorer(env, cluster.address)
    warm = min(8, n_tasks)
    score_all(env, tasks[:warm], golds[:warm], scorer=scorer)  # pools up, workers imported
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    scores = score_all(env, tasks, golds, scorer=scorer)
    elapsed = time.perf_counter() - t1
    failed = [t.id for t, p in zip(tasks, scores.passed, strict=True) if not p]
    if scorer is not None:
        scorer.close()
    return {"gradings_per_s": n_tasks / elapsed, "seconds": elapsed, "startup_s": started,
            "failed": failed, "nodes": len(scorer.nodes()) if scorer else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=164, help="HumanEval tasks (max 164)")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per side")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # one measurement
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.tasks)))
        return 0
    results: dict[str, list[dict]] = {s: [] for s in SIDES}
    for r in range(args.rounds):
        order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
        for side in order:
            print(f"round {r + 1}/{args.rounds}: {side} ...", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, __file__, "--side", side, "--tasks",
                                   str(args.tasks)], capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            out = json.loads(done.stdout.strip().splitlines()[-1])
            if out["failed"]:
                print(f"{side}: gold solutions failed: {out['failed']}", file=sys.stderr)
                return 1
            results[side].append(out)
            print(f"  {out['gradings_per_s']:.1f} gradings/s ({out['seconds']:.1f} s; "
                  f"start-up {out['startup_s']:.1f} s)", file=sys.stderr, flush=True)
    base = statistics.median(x["gradings_per_s"] for x in results["local"])
    print(f"HumanEval gold completions graded ({args.tasks} tasks, median of {args.rounds} "
          f"fresh processes per side, {os.cpu_count()} CPUs):")
    print(f"{'side':<14}{'gradings/s':>12}{'vs local':>10}{'start-up s':>12}")
    for side in SIDES:
        rate = statistics.median(x["gradings_per_s"] for x in results[side])
        start = statistics.median(x["startup_s"] for x in results[side])
        print(f"{side:<14}{rate:>12.1f}{rate / base:>9.2f}x{start:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
