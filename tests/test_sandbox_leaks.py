"""Kernel objects a job can leave behind, and quotas it could exhaust for other containers, on the
real Docker engine.

A job's leftovers must never reach the next job in the same container: the agent removes them,
or reports the container dirty and the host replaces it. Each test runs a probe, then the hostile
job, then the same probe in the same container if the host kept it, and wants the same answer.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from sandbox import Limits, Sandbox
from sandbox.worker import JobInput, Worker

pytestmark = pytest.mark.docker

QUICK = Limits(wall_s=5.0, cpu_s=5.0)
HOLD = Limits(wall_s=60.0, cpu_s=30.0)
PRELUDE = """\
import ctypes, errno, fcntl, json, os, resource, signal, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype = ctypes.c_int
def zygote():
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) not in (1, os.getpid()):
            try:
                if b"recv_fds" in open(f"/proc/{p}/cmdline", "rb").read():
                    return int(p)
            except OSError:
                pass
    raise SystemExit("no zygote")
def err(ret):
    return "ok" if ret >= 0 else errno.errorcode[ctypes.get_errno()]
"""
# Errors that say a quota is used up, as opposed to a facility being refused outright.
EXHAUSTED = {"EMFILE", "ENFILE", "EAGAIN", "ENOSPC", "ENOMEM"}


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=2) as sandbox:
        yield sandbox


def _run(worker: Worker, code: str, limits: Limits = QUICK) -> tuple[str, bool]:
    result, reusable = worker.run(JobInput.of(PRELUDE + code, "", None, limits), limits)
    assert result.status == "ok", result
    return result.stdout, reusable


def probe_around(sb: Sandbox, probe: str, hostile: str) -> tuple[str, str | None]:
    """``probe``'s output before ``hostile`` runs, and after it in the same container (None when
    the host replaces the container: then nothing can cross)."""
    worker = sb._pool.acquire()
    reusable = False
    try:
        before, reusable = _run(worker, probe)
        assert reusable, "a probe alone must not cost the container"
        reusable = False
        out, reusable = _run(worker, hostile)
        assert "planted" in out, out
        if not reusable:
            return before, None
        reusable = False
        after, reusable = _run(worker, probe)
        return before, after
    finally:
        sb._pool.release(worker, reusable)


def assert_nothing_crosses(sb: Sandbox, probe: str, hostile: str) -> None:
    before, after = probe_around(sb, probe, hostile)
    assert after is None or after == before, (before, after)


# -- objects that outlive the processes of a job ------------------------------------------------
MQ_PLANT = """
q = libc.mq_open(b"/leak", os.O_CREAT | os.O_RDWR, 0o600, None)
assert q >= 0 and libc.mq_send(q, b"secret", 6, 0) == 0
print("planted")
"""
MQ_PROBE = """
q = libc.mq_open(b"/leak", os.O_RDONLY | os.O_NONBLOCK)
print(sorted(os.listdir("/dev/mqueue")), err(q))
if q >= 0:
    buf = ctypes.create_string_buffer(8192)
    print(libc.mq_receive(q, buf, 8192, None), buf.value)
"""


def test_posix_message_queue_is_removed(sb):
    before, after = probe_around(sb, MQ_PROBE, MQ_PLANT)
    assert before == "[] ENOENT\n"
    # Removing the queue is cheap: the container is kept, and the next job finds nothing.
    assert after == before


WRITABLE = """
found = []
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys"):
        dirs[:] = []
    elif os.access(root, os.W_OK):
        found.append(root)
"""
WIPED = ["/dev/mqueue", "/dev/shm", "/scratch"]


def test_every_writable_path_is_emptied(sb):
    # Every place a job can write is one the agent empties; each gets a file (in /dev/mqueue a
    # file is a message queue) and the next job finds none of them.
    probe = WRITABLE + """
print(json.dumps({d: sorted(set(os.listdir(d)) - {"main.py"}) for d in found}, sort_keys=True))
"""
    hostile = WRITABLE + """
for d in found:
    if d == "/dev/mqueue":  # only mq_open makes files there
        assert libc.mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
    else:
        with open(os.path.join(d, "left-behind"), "w") as fh:
            fh.write("x")
print("planted", found)
"""
    before, after = probe_around(sb, probe, hostile)
    assert before == '{"/dev/mqueue": [], "/dev/shm": [], "/scratch": []}\n', before
    assert after is None or after == before, after


@pytest.mark.parametrize("kind,create", [
    ("shm", "libc.shmget(4242, 4096, 0o1600)"),
    ("sem", "libc.semget(4242, 1, 0o1600)"),
    ("msg", "libc.msgget(4242, 0o1600)"),
])
def test_sysv_ipc_does_not_cross_jobs(sb, kind, create):
    probe = f"print(len(open('/proc/sysvipc/{kind}').readlines()))\n"
    assert_nothing_crosses(sb, probe, f"assert {create} >= 0\nprint('planted')\n")


def test_socket_held_in_flight_does_not_cross_jobs(sb):
    # A socket that holds its own descriptor in its queue outlives every process, keeping its
    # abstract name and whatever else it carries (here a lock) until the kernel's garbage
    # collector of such cycles runs, which any unix socket closed anywhere on the host may
    # trigger: so the leak shows in most tries, not all, and the test makes several.
    hostile = """
import array
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"\\0leak")
fd = [s.fileno(), os.open("/etc/hostname", os.O_RDONLY)]
fcntl.flock(fd[1], fcntl.LOCK_EX)
s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fd))], 0, b"\\0leak")
print("planted")
"""
    probe = """
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.bind(b"\\0leak")
    name = "free"
except OSError as exc:
    name = errno.errorcode[exc.errno]
fh = open("/etc/hostname")
try:
    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock = "free"
except OSError as exc:
    lock = errno.errorcode[exc.errno]
print(name, lock, len(open("/proc/net/unix").readlines()))
"""
    for _ in range(5):
        assert_nothing_crosses(sb, probe, hostile)


def test_tcp_port_in_time_wait_does_not_cross_jobs(sb):
    # The side that closes first keeps the port in TIME_WAIT for a minute after it exits.
    hostile = """
srv = socket.socket()
srv.bind(("127.0.0.1", 5555))
srv.listen()
client = socket.create_connection(("127.0.0.1", 5555))
conn, _ = srv.accept()
conn.close()
client.recv(1)
client.close()
srv.close()
print("planted")
"""
    probe = """
try:
    socket.socket().bind(("127.0.0.1", 5555))
    print("free")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
    assert_nothing_crosses(sb, probe, hostile)


def test_objects_of_the_jobs_processes_die_with_them(sb):
    # Held by the job itself when it exits (no process is left, so the container is kept):
    # a lock, every inotify instance the quota allows, timers, queued signals, a memfd.
    hostile = """
lock = open("/etc/hostname")
fcntl.flock(lock, fcntl.LOCK_EX)
n = 0
while libc.inotify_init() >= 0:
    n += 1
timer = ctypes.c_void_p()
for _ in range(100):
    assert libc.timer_create(time.CLOCK_MONOTONIC, None, ctypes.byref(timer)) == 0
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
for _ in range(100):
    os.kill(os.getpid(), signal.SIGRTMIN)
os.memfd_create("left")
print("planted", n)
"""
    probe = """
fh = open("/etc/hostname")
try:
    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock = "free"
except OSError as exc:
    lock = errno.errorcode[exc.errno]
timer = ctypes.c_void_p()
print(lock, err(libc.inotify_init()), err(libc.timer_create(1, None, ctypes.byref(timer))))
"""
    before, after = probe_around(sb, probe, hostile)
    assert before == "free ok ok\n"
    assert after == before  # nothing outlived the job: no reason to replace the container


ZYGOTE_TAMPERING = {
    # The zygote forks every job: what a job changes in it (same uid) every later job inherits.
    "rlimit": ("resource.prlimit(zygote(), resource.RLIMIT_AS, (200 << 20, 200 << 20))",
               "print(resource.getrlimit(resource.RLIMIT_AS))"),
    "scheduling": ("z = zygote()\nos.setpriority(os.PRIO_PROCESS, z, 19)\n"
                   "os.sched_setscheduler(z, os.SCHED_IDLE, os.sched_param(0))\n"
                   "os.sched_setaffinity(z, {min(os.sched_getaffinity(0))})",
                   "print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), "
                   "sorted(os.sched_getaffinity(0)))"),
    # A stopped zygote starts no job: the next one would wait for it and fail.
    "stopped": ("os.kill(zygote(), signal.SIGSTOP)", "print('started')"),
    # The agent (PID 1) is the same uid too.
    "agent rlimit": ("resource.prlimit(1, resource.RLIMIT_NOFILE, (16, 16))",
                     "print(open('/proc/1/limits').read())"),
}


@pytest.mark.parametrize("kind", sorted(ZYGOTE_TAMPERING))
def test_tampering_with_the_zygote_or_agent_does_not_cross_jobs(sb, kind):
    tamper, probe = ZYGOTE_TAMPERING[kind]
    hostile = "try:\n    " + tamper.replace("\n", "\n    ") + (
        "\nexcept PermissionError:\n    pass  # refused: as good\nprint('planted')\n")
    assert_nothing_crosses(sb, probe + "\n", hostile)


def test_a_job_cannot_turn_its_run_into_an_infrastructure_error(sb):
    # sandbox_error means "the infrastructure failed" (the learner drops the sample), so a
    # program must not be able to cause it: here by starving the agent's memory mid-run.
    code = """
try:
    resource.prlimit(1, resource.RLIMIT_AS, (1 << 20, 1 << 20))
except PermissionError:
    pass
sys.stdout.write("x" * 900_000)
raise SystemExit(3)
"""
    r = sb.run(PRELUDE + code, limits=QUICK)
    assert r.status == "runtime_error" and r.exit_code == 3, r


def test_kernel_keyrings_are_out_of_reach(sb):
    # Keyrings are not namespaced (a user keyring would be shared by every container of a uid):
    # the engine's seccomp profile refuses the key syscalls, so no key can cross.
    numbers = {"x86_64": (248, 249), "aarch64": (217, 218)}.get(os.uname().machine)
    if numbers is None:
        pytest.skip("key syscall numbers known for x86_64 and aarch64 only")
    add_key, request_key = numbers
    hostile = (f"print('planted', err(libc.syscall({add_key}, b'user', b'leak', b'secret', 6,"
               " -4)))\n")  # KEY_SPEC_USER_KEYRING
    probe = f"print(err(libc.syscall({request_key}, b'user', b'leak', None, 0)))\n"
    before, after = probe_around(sb, probe, hostile)
    assert before == "EPERM\n"
    assert after is None or after == before


def test_a_tidy_job_keeps_its_container(sb):
    # The checks must not cost the warm pool: pipes, sockets that close at once (a socket pair,
    # UDP, a TCP listener), child processes, a lock and a message queue left (it is removed)
    # keep the container.
    code = """
import multiprocessing, subprocess
a, b = socket.socketpair()
a.send(b"x")
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.sendto(b"x", ("127.0.0.1", 9))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
subprocess.run([sys.executable, "-c", "pass"], check=True)
with multiprocessing.Pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
fcntl.flock(open("/etc/hostname"), fcntl.LOCK_EX)
libc.mq_open(b"/q", os.O_CREAT | os.O_RDWR, 0o600, None)
print("planted")
"""
    worker = sb._pool.acquire()
    reusable = False
    try:
        out, reusable = _run(worker, code)
        assert out == "planted\n" and reusable
    finally:
        sb._pool.release(worker, reusable)


# -- quotas that one container's job could exhaust for the others -------------------------------
IO_SETUP = {"x86_64": 206, "aarch64": 0}.get(os.uname().machine)
HOGS = {
    # Kept per uid across containers: POSIX message queue bytes, inotify instances, and pending
    # signals (each POSIX timer reserves one).
    "mqueue": ("n = 0\nwhile libc.mq_open(b'/hog%d' % n, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:"
               "\n    n += 1",
               "print(err(libc.mq_open(b'/mine', os.O_CREAT | os.O_RDWR, 0o600, None)))"),
    "inotify": ("while libc.inotify_init() >= 0:\n    pass", "print(err(libc.inotify_init()))"),
    "timers": ("t = ctypes.c_void_p()\nwhile libc.timer_create(1, None, ctypes.byref(t)) == 0:"
               "\n    pass",
               "t = ctypes.c_void_p()\nprint(err(libc.timer_create(1, None, ctypes.byref(t))))"),
    # One count for the whole host (fs.aio-max-nr, kernel.pty.max).
    "aio": (f"ctx = ctypes.c_ulong(0)\nwhile libc.syscall({IO_SETUP}, 4096, ctypes.byref(ctx)) == 0:"
            "\n    ctx = ctypes.c_ulong(0)",
            f"ctx = ctypes.c_ulong(0)\nprint(err(libc.syscall({IO_SETUP}, 1, ctypes.byref(ctx))))"),
    "pty": ("""
r, w = os.pipe()
for _ in range(4):  # 4 x 1024 descriptors: more than the host's 3072 ptys for containers
    if os.fork() == 0:
        try:
            while True:
                os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            os.write(w, b"x")
            time.sleep(60)
for _ in range(4):
    os.read(r, 1)""", """
try:
    os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    print("ok")
except OSError as exc:
    print(errno.errorcode[exc.errno])"""),
}


def _holding(sb: Sandbox, worker: Worker) -> bool:
    """Whether the hog in ``worker``'s container has taken all it could (it renames itself)."""
    top = sb.client.api.top(worker.container_id, ps_args="-o pid,comm")
    return any("quota-hog" in row[-1] for row in top["Processes"])


@pytest.mark.parametrize("kind", sorted(HOGS))
def test_a_job_cannot_exhaust_a_quota_for_other_containers(sb, kind):
    if kind == "aio" and IO_SETUP is None:
        pytest.skip("io_setup's number known for x86_64 and aarch64 only")
    take, attempt = HOGS[kind]
    hog = take + "\nlibc.prctl(15, b'quota-hog', 0, 0, 0)\ntime.sleep(60)\n"  # PR_SET_NAME
    holder, other = sb._pool.acquire(), sb._pool.acquire()
    assert holder is not other
    ended: list[object] = []
    thread = threading.Thread(target=lambda: ended.append(holder.run(
        JobInput.of(PRELUDE + hog, "", None, HOLD), HOLD)))
    thread.start()
    try:
        # Wait for the hog to hold everything it could take (not a timing assertion: it holds
        # for a minute, and if it ended instead the loop stops).
        while not _holding(sb, holder):
            assert thread.is_alive(), ended
            time.sleep(0.05)
        out, _ = _run(other, attempt + "\n")
    finally:
        holder.close()  # ends the hog
        thread.join()
        sb._pool.release(holder, False)
        sb._pool.release(other, False)
    # Either this container has a quota of its own, or nobody has the facility at all.
    assert out.strip() not in EXHAUSTED, out
    assert out.strip() == "ok" or kind in ("aio", "pty"), out


def test_a_job_that_keeps_stopping_the_zygote_gets_its_own_verdict(sb):
    # It stops the zygote over and over from its first instruction, so the zygote may not yet
    # have said "ok" for it: the job has started all the same, and its verdict must be its
    # own, never "could not start" (which the host retries, then calls an infrastructure error).
    hostile = ("z = zygote()\nend = time.monotonic() + 0.5\n"
               "while time.monotonic() < end:\n    os.kill(z, signal.SIGSTOP)\n"
               "print('ran')\n")
    for _ in range(3):
        result = sb.run(PRELUDE + hostile, limits=QUICK)
        assert result.status == "ok" and result.stdout == "ran\n", result
        assert sb.run("print('next')", limits=QUICK).stdout == "next\n"  # the pool still serves
