"""Throughput of the sandbox against its physical limit and against ``docker run --rm``.

Runs a trivial program (``pass``) with 1, 2 and 8 concurrent callers through: this runner
(warm pool) with its default limits and with ``Limits(memory_mb=256)`` (a second warm pool),
a bare fork server on the host (a warm interpreter that forks per job and captures its output,
no isolation at all: the physical limit of our design), bare host subprocesses
(``python3 -I -S -c pass``) and ``docker run --rm`` on the same image with the same isolation
flags. Prints runs/s and p50/p95 latency per setting, then the ratios (goals: 256 MB >= 0.8x
the defaults, >= 0.8x bare subprocess, >= 20x docker run).

    python benchmarks/sandbox_throughput.py [--seconds 6] [--docker-runs 16]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sandbox import Limits, Sandbox

PROGRAM = "pass"
CONCURRENCY = (1, 2, 8)
OTHER_LIMITS = Limits(memory_mb=256)
RUNNERS = ("sandbox", "sandbox 256MB", "fork server", "bare")

# A warm interpreter that forks a child per job (stdout captured through a pipe, exit status
# reported): what our containers do per job, minus every isolation control.
FORK_SERVER = r"""
import os, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    code = compile(inp.read(struct.unpack(">I", head)[0]), "main.py", "exec")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        try:
            exec(code, {"__name__": "__main__"})
            sys.stdout.flush()
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    status = os.waitpid(pid, 0)[1]
    data = b"".join(chunks)
    out.write(struct.pack(">II", status, len(data)) + data)
    out.flush()
"""


class ForkServers:
    """One fork server per concurrent caller, started once and reused."""

    def __init__(self, n: int) -> None:
        self.free: queue.Queue[subprocess.Popen] = queue.Queue()
        self.procs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", FORK_SERVER],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                      for _ in range(n)]
        for p in self.procs:
            self.free.put(p)

    def run(self, program: str) -> tuple[int, bytes]:
        p = self.free.get()
        try:
            assert p.stdin is not None and p.stdout is not None
            data = program.encode()
            p.stdin.write(struct.pack(">I", len(data)) + data)
            p.stdin.flush()
            status, size = struct.unpack(">II", p.stdout.read(8))
            return status, p.stdout.read(size)
        finally:
            self.free.put(p)

    def close(self) -> None:
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.close()
            p.wait()


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
    parser.add_argument("--rounds", type=int, default=6, help="interleaved slices per setting")
    args = parser.parse_args()

    with Sandbox(pool_size=args.pool_size) as sb:
        sb.warm()

        def sandbox_job(limits: Limits | None = None) -> None:
            r = sb.run(PROGRAM, limits=limits)
            if r.status != "ok":
                raise RuntimeError(f"sandbox run failed: {r}")

        def sandbox_256_job() -> None:
            sandbox_job(OTHER_LIMITS)

        servers = ForkServers(max(CONCURRENCY))

        def fork_server_job() -> None:
            status, _ = servers.run(PROGRAM)
            if status != 0:
                raise RuntimeError(f"fork server job failed: status {status}")

        def bare_job() -> None:
            # -I -S: the interpreter's fastest start (no site), the strictest baseline.
            subprocess.run([sys.executable, "-I", "-S", "-c", PROGRAM], check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        cmd = docker_run_cmd(sb.image, sb.limits)

        def docker_job() -> None:
            subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

        jobs = {"sandbox": sandbox_job, "sandbox 256MB": sandbox_256_job,
                "fork server": fork_server_job, "bare": bare_job}
        samples = {(name, n): Samples() for name in (*RUNNERS, "docker run")
                   for n in CONCURRENCY}
        sandbox_256_job()  # its pool starts on first use, as for a user; not timed
        while any(p["starting"] for p in sb.pool_state()):
            time.sleep(0.05)
        # Interleave slices of the fast runners, in a rotating order, so that load from other
        # processes on the machine hits them alike; `docker run` goes last so its container
        # teardown does not slow the others.
        for i in range(args.rounds):
            for n in CONCURRENCY:
                for k in range(len(RUNNERS)):
                    name = RUNNERS[(i + k) % len(RUNNERS)]
                    samples[(name, n)].add(jobs[name], n, args.seconds / args.rounds)
        servers.close()
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
        rate = {name: results[(name, n)][0] for name in (*RUNNERS, "docker run")}
        print(f"  {n} callers: memory_mb=256 at {rate['sandbox 256MB'] / rate['sandbox']:.2f}x "
              f"the defaults (goal >= 0.8); {rate['sandbox'] / rate['fork server']:.2f}x bare "
              f"fork server; {rate['sandbox'] / rate['bare']:.2f}x bare subprocess (goal >= 0.8); "
              f"{rate['sandbox'] / rate['docker run']:.1f}x docker run --rm (goal >= 20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
