"""The zygote: a pristine interpreter, started once per container by the agent, that never runs
job code nor sees job data. For each job it forks A, A forks B and exits, so B (the job, a fresh
process with the zygote's clean state) is re-parented to the agent, which waits for it. That
saves the interpreter start-up (most of a trivial job's cost) without sharing anything between
jobs.

It talks to the agent (``zygote_link``) over fd 3, a SOCK_SEQPACKET socket: ``ready 1`` once
it runs under the jobs' syscall filter (``job_filter``; ``ready 0`` without it), then per job a
message ``<cpu seconds> <disk bytes>`` carrying the job's stdin, stdout and stderr, answered
``pid N`` by the job and ``ok`` by the zygote once the job's short-lived parent has exited.

Stdlib only, and no ``from __future__`` import here: its imports are what every job inherits.
"""

import atexit
import builtins
import os
import resource
import signal  # noqa: F401 - preloaded for the jobs, which inherit the zygote's modules
import socket
import sys
import types

from sandbox.inside import job_filter, layout, seccomp

_prctl = None  # libc's prctl; None when ctypes cannot load it


def _install_filter():
    try:
        seccomp.install(job_filter.program())
        return True
    except Exception:  # noqa: BLE001 - the agent refuses to start without it
        return False


def _forget_bundle():
    """A job starts with the modules of a plain interpreter: not the bundle's (a job's own
    ``sandbox`` package must import as its own), nor the ``__future__`` they import."""
    for name in list(sys.modules):
        if name in ("sandbox", "__future__") or name.startswith("sandbox."):
            del sys.modules[name]


def _job(cpu, disk, fds):
    os.setsid()
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    os.closerange(3, 65536)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")  # out of memory, the job goes first, not the agent or the zygote
    except OSError:
        pass
    if _prctl is not None:
        _prctl(4, 1, 0, 0, 0)  # the job's own /proc/self behaves normally
    os.chdir(layout.SCRATCH)
    path = os.path.join(layout.SCRATCH, layout.MAIN)
    sys.argv[:] = [path]
    sys.path[0] = layout.SCRATCH
    _forget_bundle()
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins  # as in a script's __main__: the module, not its dict
    main.__cached__ = None
    sys.modules["__main__"] = main
    code = 0
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            try:  # noqa: SIM105 - no contextlib: jobs inherit the zygote's modules
                print(code, file=sys.stderr)
            except Exception:  # noqa: BLE001
                pass
            code = 1
    except BaseException as exc:  # noqa: BLE001 - reported as the interpreter would
        tb = None if isinstance(exc, SyntaxError) else exc.__traceback__.tb_next
        try:  # noqa: SIM105
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        except BaseException:  # noqa: BLE001
            pass
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    os._exit(code & 0xFF)


def main() -> None:
    global _prctl
    try:
        import ctypes

        _prctl = ctypes.CDLL(None).prctl
        _prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: jobs cannot ptrace the zygote
    except Exception:  # noqa: BLE001
        _prctl = None
    ctl = socket.socket(fileno=3)
    ctl.send(b"ready %d" % _install_filter())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 256, 3)
        except InterruptedError:
            continue
        if not msg:
            os._exit(0)
        cpu, disk = (int(x) for x in msg.split())
        a = os.fork()
        if a == 0:
            try:
                if os.fork() == 0:
                    try:
                        ctl.send(b"pid %d" % os.getpid())
                        ctl.close()
                        # Start once our short-lived parent has exited (we are then the
                        # agent's): the job must not see it half-gone in /proc.
                        for _ in range(100000):
                            if os.getppid() == 1:
                                break
                            os.sched_yield()
                        _job(cpu, disk, fds)
                    finally:
                        os._exit(127)
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        os.waitpid(a, 0)
        ctl.send(b"ok")
