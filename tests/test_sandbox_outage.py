"""A Docker engine killed and restarted mid-run: a second ``dockerd`` of this test's own (own
socket, data root, exec root and pidfile), so the engine other tests use is never disturbed."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import docker
import pytest

from sandbox import Sandbox
from sandbox.image import configured_image
from sandbox.worker import INSTANCE_LABEL
from tests.polling import wait_until

pytestmark = pytest.mark.docker

OUTAGE_JOBS = 2000


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class SecondEngine:
    """A private ``dockerd`` (with its own containerd) that can be killed and restarted."""

    def __init__(self, root: Path):
        self.root = root
        self.host = f"unix://{root}/docker.sock"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        # A killed dockerd leaves its containerd dead but possibly unreaped (a zombie still
        # "exists"): without its pidfile the new dockerd starts a fresh one.
        (self.root / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - the daemon writes to it
        self.proc = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
             "--bridge", "none", "--iptables=false", "--ip-masq=false", "--shutdown-timeout=2"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()

        def answers() -> bool:
            try:
                client = docker.DockerClient(base_url=self.host, timeout=5)
            except Exception:  # noqa: BLE001 - not up yet
                return False
            try:
                return bool(client.ping())
            except Exception:  # noqa: BLE001 - not up yet
                return False
            finally:
                client.close()

        assert wait_until(answers), (self.root / "dockerd.log").read_text()[-2000:]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Whatever outlived it (containerd, shims of containers killed with the engine) and the
        # mounts they held: this engine's root names them all.
        for pid in os.listdir("/proc"):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if pid.isdigit() and str(self.root).encode() in cmd:
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{self.root}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)

    def containers(self, label: str) -> list[str]:
        client = docker.DockerClient(base_url=self.host, timeout=30)
        try:
            return [c["Id"] for c in client.api.containers(all=True, filters={"label": label})]
        finally:
            client.close()

    def described(self, ids: list[str]) -> list[str]:
        """Each container's state, and the engine log's end: what a failure shows."""
        client = docker.DockerClient(base_url=self.host, timeout=30)
        try:
            out = []
            for cid in ids:
                try:
                    state = client.api.inspect_container(cid)["State"]
                    out.append(f"{cid[:12]}: {state.get('Status')} dead={state.get('Dead')} "
                               f"error={state.get('Error')!r}")
                except Exception as exc:  # noqa: BLE001 - gone meanwhile, or the engine fails
                    out.append(f"{cid[:12]}: {exc}")
        finally:
            client.close()
        log = (self.root / "dockerd.log").read_text(errors="replace").splitlines()
        return out + [line for line in log if "level=error" in line or "level=warn" in line][-8:]


@pytest.fixture
def engine():
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("starting a second Docker engine needs root and dockerd")
    docker.from_env().images.get(configured_image())  # the image to copy exists here
    # Short: a unix socket path must fit in 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="grpo-dk-", dir="/var/tmp"))
    eng = SecondEngine(root)
    try:
        eng.start()
        save = subprocess.Popen(["docker", "save", configured_image()], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "load", "-q"], stdin=save.stdout, capture_output=True,
                              env=dict(os.environ, DOCKER_HOST=eng.host), check=False)
        assert save.wait() == 0 and load.returncode == 0, load.stderr
        yield eng
    finally:
        eng.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_engine_killed_and_restarted_mid_run(engine, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    sb = Sandbox(pool_size=2)
    other = Sandbox(pool_size=1)  # closed while the engine is down
    try:
        sb.warm()
        for i in range(20):
            r = sb.run(f"print({i})")
            assert r.status == "ok" and r.stdout == f"{i}\n", r
        gc.collect()  # garbage of earlier tests: only this test's descriptors count
        fds_before, threads_before = open_fds(), threading.active_count()

        engine.kill()
        start = time.monotonic()
        fds, threads = [], []
        for _ in range(OUTAGE_JOBS):
            r = sb.run("print('up?')")
            assert r.status == "sandbox_error" and r.error, r
            fds.append(open_fds())
            threads.append(threading.active_count())
        outage_s = time.monotonic() - start
        other.close()  # never raises, also with the engine down
        gc.collect()  # the docker SDK's failed connections sit in exception reference cycles
        fds_after = open_fds()
        half = OUTAGE_JOBS // 2
        print(f"\n{OUTAGE_JOBS} jobs during the outage in {outage_s:.2f} s; open fds "
              f"{fds_before} before, at most {max(fds[:half])} in the first half, "
              f"{max(fds[half:])} in the second, {fds_after} after; threads "
              f"{threads_before} before, at most {max(threads)} during")
        # Each failed job used to leak a descriptor: nothing may grow with the number of jobs
        # (the first jobs still close the dead engine's containers, a few descriptors each).
        # A leak of one per job would add a thousand between the halves; garbage collection
        # moves the count by a few.
        assert max(fds[half:]) <= max(fds[:half]) + 4 and fds_after <= fds_before
        assert max(threads) <= threads_before + sb.max_containers + 2
        assert wait_until(lambda: threading.active_count() <= threads_before), [  # closers end
            t.name for t in threading.enumerate()]

        engine.start()
        last: list = []
        assert wait_until(lambda: last.append(sb.run("print('back')")) or last[-1].ok), (
            last[-1], sb.pool_state())
        for i in range(20):
            r = sb.run(f"print({i})")
            assert r.status == "ok" and r.stdout == f"{i}\n", r
    finally:
        sb.close()
        other.close()
    for name, box in (("the sandbox used across the outage", sb),
                      ("the sandbox closed during the outage", other)):
        label = f"{INSTANCE_LABEL}={box.instance}"
        assert wait_until(lambda label=label: engine.containers(label) == []), (
            name, engine.described(engine.containers(label)))
