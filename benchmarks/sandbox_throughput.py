"""Throughput of the sandbox against its practical limit and against ``docker run --rm``.

Runs a trivial program (``pass``) with 1, 2 and 8 concurrent callers through: this runner
(warm pool), ``docker run --rm`` on the same image with the same isolation flags, and bare host
subprocesses (``python3 -I -S -c pass``, the practical limit). Prints runs/s and p50/p95 latency per
setting, then the ratios the issue sets goals for (>= 0.8x bare, >= 20x docker run).

    python benchmarks/sandbox_throughput.py [--seconds 6] [--docker-runs 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sandbox import Limits, Sandbox

PROGRAM = "pass"
CONCURRENCY = (1, 2, 8)


class Samples:
    """Latencies and busy time of one runner at one concurrency, over one or more slices."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.elapsed = 0.0

    def add(self, job: Callable[[], None], callers: int, seconds: float,
            max_runs: int | None = None) -> None:
        """Call ``job`` back to back from ``callers`` threads for ``seconds``."""
        lock = threading.Lock()
        stop = time.monotonic() + seconds
        done = [0]

        def caller() -> None:
            while time.monotonic() < stop:
                with lock:
                    if max_runs is not None and done[0] >= max_runs:
                        return
                    done[0] += 1
                t = time.perf_counter()
                job()
                with lock:
                    self.latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        with ThreadPoolExecutor(callers) as ex:
            for f in [ex.submit(caller) for _ in range(callers)]:
                f.result()
        self.elapsed += time.perf_counter() - start

    def summary(self) -> tuple[float, float, float]:
        """(runs/s, p50 s, p95 s)."""
        lat = sorted(self.latencies)
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        return len(lat) / self.elapsed, statistics.median(lat), p95


def docker_run_cmd(image: str, limits: Limits) -> list[str]:
    return ["docker", "run", "--rm", "-i", "--network", "none", "--read-only",
            "--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--pids-limit", str(limits.pids), "--memory", f"{limits.memory_mb}m",
            "--memory-swap", f"{limits.memory_mb}m", "--cpus", str(limits.cpus),
            "--tmpfs", f"/scratch:size={limits.disk_mb}m,uid=65534,gid=65534",
            "--log-driver", "none", image, "python3", "-c", PROGRAM]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="per setting")
    parser.add_argument("--docker-runs", type=int, default=16,
                        help="cap on `docker run --rm` calls per setting (they are slow)")
    parser.add_argument("--pool-size", type=int, default=None, help="default: CPU count")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved slices per setting")
    args = parser.parse_args()

    with Sandbox(pool_size=args.pool_size) as sb:
        sb.warm()

        def sandbox_job() -> None:
            r = sb.run(PROGRAM)
            if r.status != "ok":
                raise RuntimeError(f"sandbox run failed: {r}")

        def bare_job() -> None:
            # -I -S: the interpreter's fastest start (no site), the strictest baseline.
            subprocess.run([sys.executable, "-I", "-S", "-c", PROGRAM], check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        cmd = docker_run_cmd(sb.image, sb.limits)

        def docker_job() -> None:
            subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        samples = {(name, n): Samples() for name in ("sandbox", "bare", "docker run")
                   for n in CONCURRENCY}
        # Interleave slices of the two fast runners so that load from other processes on the
        # machine hits both alike; `docker run` goes last so its container teardown does not
        # slow the others.
        for _ in range(args.rounds):
            for n in CONCURRENCY:
                samples[("sandbox", n)].add(sandbox_job, n, args.seconds / args.rounds)
                samples[("bare", n)].add(bare_job, n, args.seconds / args.rounds)
        for n in CONCURRENCY:
            samples[("docker run", n)].add(docker_job, n, args.seconds * 4,
                                           max_runs=args.docker_runs)
        results = {key: s.summary() for key, s in samples.items()}
        print(f"image {sb.image}, pool size {sb.pool_size}, {os.cpu_count()} CPUs, "
              f"program {PROGRAM!r}")
    print(f"{'runner':<12}{'callers':>8}{'runs/s':>10}{'p50 ms':>10}{'p95 ms':>10}")
    for (name, n), (rate, p50, p95) in sorted(results.items(), key=lambda kv: (kv[0][1],
                                                                                 kv[0][0])):
        print(f"{name:<12}{n:>8}{rate:>10.1f}{p50 * 1e3:>10.1f}{p95 * 1e3:>10.1f}")
    print("ratios (sandbox runs/s over the other runner's):")
    for n in CONCURRENCY:
        sb_rate = results[("sandbox", n)][0]
        print(f"  {n} callers: {sb_rate / results[('bare', n)][0]:.2f}x bare subprocess "
              f"(goal >= 0.8), {sb_rate / results[('docker run', n)][0]:.1f}x docker run --rm "
              f"(goal >= 20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
