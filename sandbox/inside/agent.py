"""The in-container agent: PID 1 of every sandbox container (stdlib only, never imported by the
host at run time: ``sandbox.worker`` ships it as one program, see ``sandbox.bundle``).

The host sends it jobs over the container's stdin and reads results from its stdout
(``channel``). Every job runs in a fresh process (its own session, with rlimits) inside
``/scratch``, forked from a pristine zygote interpreter that never runs job code (``zygote``,
whose bundle is the agent's first argument); afterwards every process left in the container is
killed and the scratch space wiped, and the reply says whether anything could have outlived the
job ("dirty"), in which case the host discards the container (``job``). What outlives a job's
processes is either removed (``clean_up``: files in ``/scratch`` and ``/dev/shm``, POSIX message
queues) or detected (``baseline``: SysV IPC, sockets held in flight or left in TCP TIME_WAIT, a
re-limited zygote or agent), and a stopped zygote is resumed. Jobs run under a seccomp filter
the zygote installs (``job_filter``).

Being PID 1 matters: the kernel does not deliver signals to a namespace's init unless it has a
handler, so a job that kills every process it can (``kill(-1, SIGKILL)``) cannot take the agent
down. The agent also makes itself non-dumpable so that jobs (same uid) cannot ptrace it or open
``/proc/1/fd/*`` to forge frames.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import struct
import sys

from sandbox.inside import channel, clean_up, layout, processes
from sandbox.inside.baseline import Baseline
from sandbox.inside.job import run_job
from sandbox.inside.zygote_link import Zygote


def _nondumpable():
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        return True
    except Exception:  # noqa: BLE001 - reported in the hello
        return False


def main() -> None:
    # As PID 1 only signals with a handler reach us; make sure none has one (Python installs
    # one for SIGINT), so no job can interrupt the agent.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    dumpable_off = _nondumpable()
    if not os.path.isdir(layout.MQUEUE):
        # Queues we cannot list (nor remove) must not exist: their quota is then 0 bytes.
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    zygote = Zygote(sys.argv[1])
    baseline = Baseline(zygote.pid)
    channel.send({"ready": zygote.ready, "pid": os.getpid(), "nondumpable": dumpable_off,
                  "syscall_filter": zygote.filtered, "oom_counter": processes.oom_kills() >= 0})
    while True:
        try:
            head = channel.read_exact(0, 4)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            return
        if head is None:
            return
        body = channel.read_exact(0, struct.unpack(">I", head)[0])
        if body is None:
            return
        req = json.loads(body)
        try:
            reply = run_job(req, zygote, baseline)
        except channel.HostGone:
            return
        except Exception as exc:  # report, then let the host discard this container
            reply = {"status": "sandbox_error", "error": f"agent: {exc!r}", "dirty": True}
        reply["id"] = req.get("id")
        channel.send(reply)
        if clean_up.retiring:
            return
