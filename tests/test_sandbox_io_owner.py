"""I/O-owner signals: a program must not name another process the owner of a file's signals.

With ``O_ASYNC`` on a file and ``F_SETOWN`` (or ``F_SETOWN_EX``, or a socket's ``FIOSETOWN`` /
``SIOCSPGRP`` ioctl) naming the judge, the kernel itself sends the judge ``SIGIO`` (or, after
``F_SETSIG``, any signal) whenever the file is ready: past the filter that refuses ``kill``.
Both filters refuse these commands: the agent's for every job, ``no_signals`` for the graded
program. Reading the owner and setting ``O_ASYNC`` alone still work.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import struct

import pytest

from sandbox.harness import run_tests
from sandbox.inside import job_filter, no_signals, seccomp

F_SETOWN_EX, F_OWNER_PID = 15, 1
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902

# Each attempt names ``target`` (a pid) the owner of a ready pipe or socket, in its own way.
ATTEMPTS = {
    "F_SETOWN": "fcntl.fcntl(r, fcntl.F_SETOWN, target)",
    "F_SETOWN group": "fcntl.fcntl(r, fcntl.F_SETOWN, -os.getpgid(target))",
    "F_SETOWN_EX": "fcntl.fcntl(r, 15, struct.pack('ii', 1, target))",
    "F_SETSIG": "fcntl.fcntl(r, 10, signal.SIGKILL)",
    "FIOSETOWN": "fcntl.ioctl(s, 0x8901, struct.pack('i', target))",
    "SIOCSPGRP": "fcntl.ioctl(s, 0x8902, struct.pack('i', target))",
    # The kernel reads the command as a 32-bit int: high bits must not hide F_SETOWN.
    "raw F_SETOWN, high bits set": "assert ctypes.CDLL(None, use_errno=True).syscall("
                                   "{'x86_64': 72, 'aarch64': 25}[os.uname().machine], r, "
                                   "ctypes.c_long((1 << 32) | 8), target) == 0",
}
SETUP = """\
import ctypes, fcntl, os, signal, socket, struct
def attempt(what, target):
    r, w = os.pipe()
    s, peer = socket.socketpair()
    for fd in (r, s.fileno()):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    try:
        exec(what)
        outcome = "done"
    except (OSError, AssertionError) as exc:
        outcome = "refused"
    os.write(w, b"x")  # ready: an owner, if one was set, is signalled now
    peer.send(b"x")
    return outcome
"""


def _in_child(install, body) -> str:
    """Run ``body()`` in a forked child of this process after ``install()``; its one-line result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            install()
            os.write(w, body().encode())
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return out


def _outcomes(target: int) -> str:
    """How each way to name ``target`` the owner of a file's signals fares (F_SETSIG picks
    SIGWINCH, ignored by default, and nothing is made ready: no signal is sent here)."""
    results = []
    r, w = os.pipe()
    s, peer = socket.socketpair()
    for name, call in [
        ("F_SETOWN", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, target)),
        ("F_SETOWN_EX", lambda: fcntl.fcntl(r, F_SETOWN_EX, struct.pack("ii", F_OWNER_PID, target))),
        ("F_SETSIG", lambda: fcntl.fcntl(r, 10, 28)),
        ("FIOSETOWN", lambda: fcntl.ioctl(s, FIOSETOWN, struct.pack("i", target))),
        ("SIOCSPGRP", lambda: fcntl.ioctl(s, SIOCSPGRP, struct.pack("i", target))),
        ("F_GETOWN", lambda: fcntl.fcntl(r, fcntl.F_GETOWN)),
        ("O_ASYNC", lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)),
    ]:
        try:
            call()
            results.append(f"{name}=ok")
        except OSError as exc:
            results.append(f"{name}={errno.errorcode[exc.errno]}")
    fcntl.fcntl(r, fcntl.F_SETFL, 0)  # no O_ASYNC left: closing sends nothing to anyone
    for fd in (r, w):
        os.close(fd)
    s.close()
    peer.close()
    return " ".join(results)


REFUSED = ("F_SETOWN=EPERM F_SETOWN_EX=EPERM F_SETSIG=EPERM FIOSETOWN=EPERM SIOCSPGRP=EPERM "
           "F_GETOWN=ok O_ASYNC=ok")


def _install_agent_filter() -> None:
    seccomp.install(job_filter.program())  # as the zygote does


needs_known_arch = pytest.mark.skipif(not no_signals.supported(),
                                      reason="syscall numbers known for x86_64 and aarch64")


@needs_known_arch
def test_without_a_filter_the_owner_can_be_set():
    # The attack's premise on this kernel: unfiltered, every command names the owner.
    out = _in_child(lambda: None, lambda: _outcomes(os.getpid()))
    assert out == REFUSED.replace("EPERM", "ok"), out


@needs_known_arch
def test_the_judges_filter_refuses_every_way_to_set_an_owner():
    parent = os.getpid()
    out = _in_child(lambda: no_signals.install(parent), lambda: _outcomes(parent))
    assert out == REFUSED, out


@needs_known_arch
def test_the_agents_filter_refuses_every_way_to_set_an_owner():
    out = _in_child(_install_agent_filter, lambda: _outcomes(os.getpid()))
    assert out == REFUSED, out


@pytest.mark.docker
def test_a_job_cannot_set_an_owner(sandbox):
    r = sandbox.run(
        "import errno, fcntl, os, socket, struct\n"
        f"F_SETOWN_EX, F_OWNER_PID, FIOSETOWN, SIOCSPGRP = {F_SETOWN_EX}, {F_OWNER_PID}, "
        f"{FIOSETOWN}, {SIOCSPGRP}\n"
        + _source(_outcomes) + "print(_outcomes(os.getpid()))\n")
    assert r.status == "ok" and r.stdout.strip() == REFUSED, r


def _source(func) -> str:
    import inspect

    return inspect.getsource(func)


@pytest.mark.docker
def test_an_io_owner_attempt_cannot_signal_the_judge(sandbox):
    # Before the fix the judge died of SIGIO (exit -29) and left no record. Now each attempt is
    # refused and the grade is the ordinary one: the honest case passes, the wrong one fails.
    judge = "int(open('/proc/self/stat').read().split(') ')[1].split()[1])"
    program = SETUP + f"def judge():\n    return {judge}\n" + "def add(a, b):\n    return a - b\n"
    names = list(ATTEMPTS)
    tests = [f"assert attempt({ATTEMPTS[n]!r}, judge()) == 'refused'" for n in names]
    tests += ["assert add(2, 0) == 2", "assert add(2, 3) == 5"]
    report = run_tests(sandbox, program, tests)
    assert report.record_found and report.guarded, report
    assert report.run.status == "ok", report.run
    assert [names[i] for i in range(len(names)) if i not in report.passed] == [], report.errors
    assert report.passed == [*range(len(names)), len(names)], report.reasons
    assert report.reasons[len(names) + 1] == "failed"
