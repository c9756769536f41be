"""One job in the agent, phase by phase: spawn (its inputs written and the job started in the
zygote), its run (``relay``: pump, stop, status), then clean or dirty (``_settle``: whether the
container can take the next job).

Nothing a job does to its own container may turn its run into an infrastructure error
(``sandbox_error``, which the learner drops instead of scoring): once its code has run, the
reply is the job's verdict. What the agent cannot clean or check, and any failure of the agent
after the job started, is the verdict ``dirty_container`` (a failure of the job) with a
replaced container.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import time

from sandbox.inside import channel, clean_up, layout, processes
from sandbox.inside.baseline import Baseline, sysv_ipc_used
from sandbox.inside.relay import Relay
from sandbox.inside.zygote_link import Zygote


def run_job(req: dict, zygote: Zygote, baseline: Baseline) -> dict:
    """One job, phase by phase: spawn (its inputs written and the job started; a failure there
    is the infrastructure's, as no job code ran), its run (``_watch``: pump, stop, status),
    then clean or dirty (``_settle``: whether the container can take the next job)."""
    start = time.monotonic()
    spawned = _spawn(req, zygote)
    if isinstance(spawned, dict):
        return spawned
    pid, stdin, stdin_w, out_r, err_r, oom_before = spawned
    try:
        reply = _watch(req, zygote, pid, stdin, stdin_w, out_r, err_r, start, oom_before)
    except channel.HostGone:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the job's code had run
        # The job ran, so it may be what broke us: this is its verdict, never the host's.
        with contextlib.suppress(OSError):
            stdin.discard()  # the host sends all of it before it reads the reply
        reply = _verdict("dirty_container", f"agent: {channel.short(exc)}",
                         time.monotonic() - start)
    return _settle(reply, zygote, baseline)


def _spawn(req, zygote):
    """The job's files written from the channel and the job started in the zygote: (pid, its
    stdin still to relay, the pipes' ends, the OOM kill count before it), or the reply when it
    could not start. Before any job code ran, a failure is not the job's doing and safe to
    retry on another container (``started: False``)."""
    specs = [(layout.MAIN, int(req["code_bytes"]))]
    specs += [(n, int(b)) for n, b in req.get("files") or []]
    source = channel.Input(sum(size for _, size in specs))
    error = channel.write_inputs(layout.SCRATCH, specs, source)
    stdin = channel.Input(int(req.get("stdin_bytes") or 0))
    if error is not None:  # the host checked that the inputs fit
        stdin.discard()
        return {"status": "sandbox_error", "error": error, "dirty": True, "started": False}
    oom_before = processes.oom_kills()
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = zygote.spawn(req, [stdin_r, out_w, err_w])
    for fd in (stdin_r, out_w, err_w):
        os.close(fd)
    if pid is None:
        for fd in (stdin_w, out_r, err_r):
            os.close(fd)
        stdin.discard()
        # No job code ran (e.g. the last job killed the zygote): the host may retry elsewhere.
        return {"status": "sandbox_error", "error": "the job could not be started", "dirty": True,
                "started": False}
    return pid, stdin, stdin_w, out_r, err_r, oom_before


def _verdict(status, error, wall_s):
    return {"status": status, "exit_code": None, "stdout": "", "stderr": "", "truncated": False,
            "wall_s": wall_s, "cpu_s": 0.0, "error": error}


def _watch(req, zygote, pid, stdin, stdin_w, out_r, err_r, start, oom_before):
    """The job's run, phase by phase: pump (relay stdin, collect the output until the job
    exits or hits a limit), stop (a job still running is terminated, then killed), then its
    status. The reply; ``_settle`` adds whether the container can be trusted."""
    relay = Relay(req, pid, stdin, stdin_w, out_r, err_r, start)
    relay.pump()
    if relay.wait_status is None:  # a timeout or the output limit
        relay.wait_status, relay.rusage = processes.stop(pid)
    leftover = processes.kill_all(zygote.pid)
    # A job may have stopped the zygote (same uid): resume it, which also drops a stop signal
    # still pending, or the next job would never start.
    with contextlib.suppress(OSError):
        os.kill(zygote.pid, signal.SIGCONT)
    relay.close()
    wall_s = time.monotonic() - start
    stdin.discard()  # what the job did not read, so that the next frame stays in step
    return _reply(req, relay, wall_s, leftover, oom_before)


def _reply(req, relay, wall_s, leftover, oom_before):
    """The job's verdict from how it ended; a limit hit, an OOM kill or processes left behind
    cost the container (``dirty``)."""
    rusage, wait_status = relay.rusage, relay.wait_status
    cpu_s = (rusage.ru_utime + rusage.ru_stime) if rusage is not None else 0.0
    signaled = os.WIFSIGNALED(wait_status)
    code = -os.WTERMSIG(wait_status) if signaled else os.WEXITSTATUS(wait_status)
    oom = processes.oom_kills() > oom_before >= 0
    err = bytes(relay.outputs[relay.err_r])
    status = relay.status
    if status is None:
        status = _exit_status(wait_status, code, cpu_s, req["cpu_s"], oom, err)
    limit_hit = status in ("timeout", "memory_limit", "output_limit")
    return {
        "status": status,
        "exit_code": code,
        "stdout": base64.b64encode(bytes(relay.outputs[relay.out_r])).decode(),
        "stderr": base64.b64encode(err).decode(),
        "truncated": relay.truncated,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "dirty": bool(leftover or oom or limit_hit),
    }


def _exit_status(wait_status, code, cpu_s, cpu_limit, oom, err):
    """The status of a job that exited by itself (or was killed by the kernel)."""
    sig = os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else 0
    cpu_out = sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= cpu_limit)
    memory_error = err.rstrip().rsplit(b"\n", 1)[-1].startswith(b"MemoryError")
    if cpu_out:
        return "timeout"
    if code != 0 and (oom or memory_error):
        return "memory_limit"
    return "ok" if code == 0 else "runtime_error"


def _settle(reply, zygote, baseline):
    """After a job: nothing of it may run, nothing it wrote may stay, and nothing it changed may
    reach the next job. What is left that cannot be removed but is seen (processes that had to be
    killed, SysV IPC, sockets in flight, a changed zygote) costs the container ("dirty"); what
    the agent could not clean or check makes the verdict ``dirty_container``, the job's own
    failure, never an infrastructure error (a job must not be able to turn its grade into one).
    """
    why = None
    try:
        leftover = processes.kill_all(zygote.pid)
        with contextlib.suppress(OSError):
            os.kill(zygote.pid, signal.SIGCONT)
        why = clean_up.after_job(baseline.roots)
        dirty = (leftover or why is not None or not zygote.alive() or zygote.out_of_step
                 or sysv_ipc_used() or baseline.changed())
    except Exception as exc:  # noqa: BLE001 - the job's doing, as far as anyone can tell
        why = f"agent: {channel.short(exc)}"
        dirty = True
    if why is not None:
        if reply.get("status") in ("ok", "runtime_error"):
            reply["status"] = "dirty_container"
        reply["error"] = why
    reply["dirty"] = bool(reply.get("dirty") or dirty)
    return reply
