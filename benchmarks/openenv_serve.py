"""Served grpo-gym envs (``python -m envs serve``) side by side with ``env.score`` in process.

1. Agreement: OpenEnv's ``GenericEnvClient`` plays full episodes of every built-in env
   (``--cases`` per env, mixed quality: golds, the report card's corpora of hacks and honest
   answers, shallow completions, tool episodes) and its rewards are compared with ``env.score``
   of the same completions.
2. Load: ``--sessions`` concurrent sessions (one thread and one WebSocket each) play
   ``--steps`` episodes in all against one server, a subprocess started with the real command
   line; the same (task, completion) pairs are graded in process by as many threads calling
   ``env.score``. Prints gradings/s and p50/p99 step latency of both, and their ratio (goal
   >= 0.8 of in-process for the code env). Every step must get exactly one answer, for its own
   task, with the in-process reward.

    python benchmarks/openenv_serve.py [--cases 100] [--sessions 32] [--steps 256]
                                       [--envs grpo/CodeTests-v0 grpo/MathExact-v0]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

import envs  # noqa: E402,F401 - registers the envs
from envs.tools.serve.side_by_side import (  # noqa: E402
    SERVED,
    Case,
    mixed_cases,
    play,
    reference,
    replay_kwargs,
)


@contextlib.contextmanager
def server(env_id: str, sessions: int) -> Iterator[str]:
    """``python -m envs serve`` in a subprocess; yields its URL, stops it on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kwargs = json.dumps(replay_kwargs(env_id))  # the cases are test tasks, played by id
    proc = subprocess.Popen([sys.executable, "-m", "envs", "serve", env_id, "--env-kwargs",
                             kwargs, "--port", str(port), "--max-sessions", str(sessions)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("serving"):
            raise RuntimeError(f"the server for {env_id} did not start: {line!r}")
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)


def wait_healthy(url: str, within_s: float = 60.0) -> None:
    """The line above is printed before uvicorn binds: wait for /health to answer."""
    import httpx

    deadline = time.monotonic() + within_s
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def agreement(env_id: str, n: int) -> tuple[int, int, list[str]]:
    kwargs = SERVED[env_id]
    env = gym.make(env_id, **kwargs).unwrapped
    try:
        cases = mixed_cases(env, env_id, kwargs, n)
        want = [reference(env, c) for c in cases]
    finally:
        env.close()
    with server(env_id, 4) as url, GenericEnvClient(base_url=url) as client:
        got = [play(client, c)[0] for c in cases]
    wrong = [f"{c.kind} {c.task_id}: wire {g} vs score {w}"
             for c, g, w in zip(cases, got, want, strict=True) if g != w]
    return len(cases) - len(wrong), len(cases), wrong


def _spread(work: list[Case], sessions: int) -> list[list[Case]]:
    return [work[i::sessions] for i in range(sessions)]


def over_the_wire(url: str, work: list[Case], sessions: int) -> dict:
    latencies: list[float] = []
    answers: list[tuple[Case, float | None, str | None, bool]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def session(cases: list[Case]) -> None:
        try:
            with GenericEnvClient(base_url=url, message_timeout_s=600) as client:
                for case in cases:
                    client.reset(task_id=case.task_id)
                    start = time.perf_counter()
                    result = client.step({"completion": case.turns[-1]})
                    took = time.perf_counter() - start
                    with lock:
                        latencies.append(took)
                        answers.append((case, result.reward, result.observation.get("task_id"),
                                        result.done))
        except Exception as exc:  # noqa: BLE001 - counted as lost steps below
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=session, args=(part,)) for part in _spread(work, sessions)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"wall": wall, "latencies": latencies, "answers": answers, "errors": errors}


def in_process(env, work: list[Case], sessions: int) -> dict:
    latencies: list[float] = []
    rewards: dict[int, float] = {}
    lock = threading.Lock()

    def session(part: list[tuple[int, Case]]) -> None:
        for i, case in part:
            start = time.perf_counter()
            reward = env.score(case.task_id, case.turns[-1])[0]
            took = time.perf_counter() - start
            with lock:
                latencies.append(took)
                rewards[i] = reward

    indexed = list(enumerate(work))
    threads = [threading.Thread(target=session, args=(indexed[i::sessions],))
               for i in range(sessions)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"wall": time.perf_counter() - start, "latencies": latencies, "rewards": rewards}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load(env_id: str, sessions: int, steps: int) -> dict:
    kwargs = SERVED[env_id]
    env = gym.make(env_id, **kwargs).unwrapped
    try:
        pool = [c for c in mixed_cases(env, env_id, kwargs, 200) if len(c.turns) == 1]
        work = [pool[i % len(pool)] for i in range(steps)]
        # One untimed round of every session first, on both sides: the checker's worker
        # processes and the sandbox pool start lazily, and that start is not what is measured.
        in_process(env, work[:sessions], sessions)
        local = in_process(env, work, sessions)
    finally:
        env.close()
    with server(env_id, sessions) as url:
        over_the_wire(url, work[:sessions], sessions)
        wire = over_the_wire(url, work, sessions)
    want = {(c.task_id, c.turns[-1]): local["rewards"][i] for i, c in enumerate(work)}
    answered = wire["answers"]
    lost = steps - len(answered)
    wrong_task = sum(1 for c, _, tid, _ in answered if tid != c.task_id)
    not_done = sum(1 for *_, done in answered if not done)
    disagree = sum(1 for c, r, _, _ in answered if r != want[(c.task_id, c.turns[-1])])
    return {
        "env": env_id, "sessions": sessions, "steps": steps,
        "wire_per_s": len(answered) / wire["wall"], "local_per_s": steps / local["wall"],
        "wire_p50": _pct(wire["latencies"], 0.5), "wire_p99": _pct(wire["latencies"], 0.99),
        "local_p50": _pct(local["latencies"], 0.5), "local_p99": _pct(local["latencies"], 0.99),
        "lost": lost, "wrong_task": wrong_task, "not_done": not_done, "disagree": disagree,
        "errors": wire["errors"][:3],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100, help="agreement cases per env")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--steps", type=int, default=256, help="load: episodes in all, per env")
    parser.add_argument("--envs", nargs="+", default=["grpo/CodeTests-v0", "grpo/MathExact-v0"],
                        help="the envs of the load part")
    parser.add_argument("--skip-agreement", action="store_true")
    args = parser.parse_args()
    failed = False
    if not args.skip_agreement:
        print("## Agreement: GenericEnvClient episodes vs env.score on the same completions")
        total_ok = total = 0
        for env_id in sorted(SERVED):
            ok, n, wrong = agreement(env_id, args.cases)
            total_ok, total = total_ok + ok, total + n
            print(f"{env_id:22s} {json.dumps(SERVED[env_id]):50s} {ok}/{n} equal")
            for line in wrong[:5]:
                print(f"    {line}")
        print(f"all: {total_ok}/{total} equal")
        failed |= total_ok != total
    print(f"\n## Load: {args.sessions} concurrent sessions, one server, vs env.score in "
          f"{args.sessions} threads")
    print("| env | steps | wire gradings/s | in-process gradings/s | ratio | wire p50 / p99 s "
          "| in-process p50 / p99 s | lost | wrong task | not done | reward differs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for env_id in args.envs:
        r = load(env_id, args.sessions, args.steps)
        ratio = r["wire_per_s"] / r["local_per_s"]
        print(f"| {env_id} | {r['steps']} | {r['wire_per_s']:.1f} | {r['local_per_s']:.1f} | "
              f"{ratio:.2f} | {r['wire_p50']:.3f} / {r['wire_p99']:.3f} | "
              f"{r['local_p50']:.3f} / {r['local_p99']:.3f} | {r['lost']} | {r['wrong_task']} | "
              f"{r['not_done']} | {r['disagree']} |", flush=True)
        for error in r["errors"]:
            print(f"    session error: {error}")
        failed |= bool(r["lost"] or r["wrong_task"] or r["not_done"] or r["disagree"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
