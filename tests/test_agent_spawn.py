"""The agent's spawn handshake with its zygote (``sandbox.inside.zygote_link.Zygote.spawn``), on
the host with a stand-in zygote: a job that stops the zygote between its pid and the zygote's
"ok" has started, and must be reported as started (a "not started" reply would have the host
retry it and, after three tries, call it an infrastructure error: a grade the job chose)."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from sandbox.inside import zygote_link as agent


def stand_in(after_pid: str) -> agent.Zygote:
    """A Zygote whose process takes one request and sends ``pid N``, then ``after_pid``:
    ``stop`` stops itself (as a job's SIGSTOP would) and says "ok" once continued; ``mute``
    never says "ok"; ``nothing`` sends no pid either."""
    zygote = object.__new__(agent.Zygote)
    zygote.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote.out_of_step = False
    pid = os.fork()
    if pid == 0:
        try:
            zygote.sock.close()
            _, fds, _, _ = socket.recv_fds(theirs, 256, 3)
            for fd in fds:
                os.close(fd)
            if after_pid != "nothing":
                theirs.send(b"pid %d" % os.getpid())
            if after_pid == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
                theirs.send(b"ok")
            time.sleep(30)
        finally:
            os._exit(0)
    theirs.close()
    zygote.pid = pid
    zygote.sock.settimeout(agent.ZYGOTE_REPLY_S)  # as Zygote.__init__ leaves it
    return zygote


@pytest.fixture
def pipes():
    r, w = os.pipe()
    yield [r, w]
    os.close(r)
    os.close(w)


def finish(zygote: agent.Zygote) -> None:
    os.kill(zygote.pid, signal.SIGKILL)
    os.waitpid(zygote.pid, 0)
    zygote.sock.close()


REQ = {"cpu_s": 1, "disk_mb": 1}


def test_a_zygote_stopped_before_its_ok_is_woken_and_the_job_counts_as_started(pipes):
    zygote = stand_in("stop")
    try:
        assert zygote.spawn(REQ, pipes) == zygote.pid
        assert not zygote.out_of_step  # the "ok" came: the handshake is in step
        assert zygote.sock.gettimeout() == agent.ZYGOTE_REPLY_S
    finally:
        finish(zygote)


def test_a_zygote_that_never_says_ok_still_reports_the_started_job_and_retires(pipes):
    zygote = stand_in("mute")
    try:
        start = time.monotonic()
        assert zygote.spawn(REQ, pipes) == zygote.pid
        assert zygote.out_of_step  # its late "ok" must not answer the next job's spawn
        # bounded well inside the host's grace for the reply (not a timing assertion on speed)
        assert time.monotonic() - start < agent.SPAWN_NUDGE_S * agent.SPAWN_NUDGES + 5
    finally:
        finish(zygote)


def test_no_pid_means_not_started(pipes, monkeypatch):
    monkeypatch.setattr(agent, "ZYGOTE_REPLY_S", 0.3)
    zygote = stand_in("nothing")
    zygote.sock.settimeout(0.3)
    try:
        assert zygote.spawn(REQ, pipes) is None
        assert not zygote.out_of_step
    finally:
        finish(zygote)
