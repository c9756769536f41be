"""What a job could leave in the container that the clean-up cannot remove, only see: SysV
IPC objects, sockets held in flight or left in TCP TIME_WAIT, and a re-limited, re-niced or
re-pinned zygote or agent. Any of them costs the container (the host replaces it).
"""

from __future__ import annotations

import os
import resource
import stat

from sandbox.inside import layout


def sysv_ipc_used() -> bool:
    """Whether any SysV shared memory, message queue or semaphore set exists (they outlive
    their creator, and the agent does not remove them)."""
    for name in ("shm", "msg", "sem"):
        try:
            with open("/proc/sysvipc/" + name) as fh:
                if len(fh.read().splitlines()) > 1:
                    return True
        except OSError:
            pass
    return False


def _socket_counts():
    """(sockets allocated, TCP sockets in TIME_WAIT) in the container's network namespace, read
    from its counters: walking the socket tables (/proc/net/tcp) costs milliseconds."""
    try:
        with open("/proc/net/sockstat") as fh:
            words = fh.read().split()
        return int(words[words.index("used") + 1]), int(words[words.index("tw") + 1])
    except (OSError, ValueError, IndexError):
        return None


_RLIMITS = sorted(getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_"))


def _process_state(pid):
    """What a job could change in a process of the same uid, and jobs inherit from the zygote:
    its rlimits (prlimit), niceness, scheduling policy and CPU affinity."""
    try:
        return ([resource.prlimit(pid, r) for r in _RLIMITS], os.getpriority(os.PRIO_PROCESS, pid),
                os.sched_getscheduler(pid), os.sched_getaffinity(pid))
    except OSError:
        return None


class Baseline:
    """The container's state between jobs, taken at start; ``changed`` (after a job's processes
    are gone) tells whether a job left something the next one could see or suffer."""

    def __init__(self, zygote_pid: int):
        self.zygote_pid = zygote_pid
        self.sockets = _socket_counts()
        self.states = {pid: _process_state(pid) for pid in (os.getpid(), zygote_pid)}
        # The places a job can write, with the modes the clean-up gives them back.
        self.roots = [(root, stat.S_IMODE(os.lstat(root).st_mode))
                      for root in (layout.SCRATCH, layout.SHM) if os.path.isdir(root)]

    def changed(self) -> bool:
        # With no process left, a socket survives only in flight (a unix socket passed in a
        # socket's queue, keeping alive whatever files it carries) or closing (TCP); a closed
        # TCP socket then keeps its port in TIME_WAIT, where a later job binding it fails.
        sockets = _socket_counts()
        return (sockets is None or sockets != self.sockets
                or any(_process_state(pid) != state for pid, state in self.states.items()))
