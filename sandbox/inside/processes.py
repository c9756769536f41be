"""The processes of the agent's container: a job's exit and its stop, the sweep that kills
whatever a job left running, and the cgroup's count of OOM kills.

The agent is PID 1, so every orphan is re-parented to it and reaped here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time

TERM_GRACE_S = 0.1
#: How a job ended: its wait status and resource usage (None when it was never seen exiting).
Exit = tuple[int, "resource.struct_rusage | None"]


def oom_kills() -> int:
    """The container's OOM kills so far, or -1 when the kernel does not count them."""
    # cgroup v2 and v1 (kernel >= 4.13) both count OOM kills of this container's cgroup.
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return -1


def _others(spare):
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in spare:
            pids.append(int(name))
    return pids


def kill_all(zygote_pid: int) -> bool:
    """SIGKILL every process but ourselves and the zygote; return whether there were any.

    A process that keeps forking could outrun the scan; then everything is killed, the zygote
    too, and the container is reported dirty either way.
    """
    spare = {os.getpid(), zygote_pid}
    found = False
    for _ in range(50):
        pids = _others(spare)
        if not pids:
            return found
        found = True
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        _reap(spare)
        time.sleep(0.001)
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        _reap(set())
        time.sleep(0.001)
    return True


def _reap(spare):
    """Collect exited children (orphans are re-parented to us, PID 1), except ``spare``."""
    for p in _others(spare):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(p, os.WNOHANG)


def try_wait(pid: int) -> Exit | None:
    """(status, rusage) once the job has exited, else None. Until its short-lived parent in the
    zygote has exited, the job is not yet our child; that also reads as "not yet"."""
    try:
        got, status, rusage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return (status, rusage) if got == pid else None


def wait(pid: int, timeout: float) -> Exit | None:
    """``try_wait`` until the job has exited or ``timeout`` seconds have passed."""
    end = time.monotonic() + timeout
    while True:
        done = try_wait(pid)
        if done is not None or time.monotonic() > end:
            return done
        time.sleep(0.002)


def stop(pid: int) -> Exit:
    """(status, rusage) of a job that is still running: its group is asked to stop (SIGTERM,
    ``TERM_GRACE_S``), then everything in it is killed."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGTERM)
    done = None
    end = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < end:
        done = try_wait(pid)
        if done is not None:
            break
        time.sleep(0.005)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if done is None:
        done = wait(pid, 5.0)
    # Never seen exiting (it cannot outlive SIGKILL): report it as killed.
    return done if done is not None else (signal.SIGKILL, None)
