"""The in-container agent: PID 1 of every sandbox container (stdlib only, never imported by the host).

The host sends it jobs over the container's stdin and reads results from its stdout, each frame
a 4-byte big-endian length plus JSON. Every job runs in a fresh process (its own session, with
rlimits) inside ``/scratch``, forked from a pristine zygote interpreter that never runs job code
(see ``ZYGOTE``); afterwards every process left in the container is killed and the
scratch space wiped, and the reply says whether anything could have outlived the job ("dirty"),
in which case the host discards the container. What outlives a job's processes is either removed
(files in ``/scratch`` and ``/dev/shm``, POSIX message queues) or detected (SysV IPC, sockets held
in flight or left in TCP TIME_WAIT, a re-limited zygote or agent: see ``Baseline``), and a
stopped zygote is resumed. Jobs run under a seccomp filter the zygote installs (``DENIED``).

Nothing a job does to its own container may turn its run into an infrastructure error
(``sandbox_error``, which the learner drops instead of scoring): once its code has run, the
reply is the job's verdict. The clean-up is iterative, bounded (``WIPE_ENTRIES``,
``CLEAN_UP_S``) and runs on a thread with a fixed stack of its own; what it cannot clean or
check, and any failure of the agent after the job started, is the verdict ``dirty_container``
(a failure of the job) with a replaced container (``_settle``).

Being PID 1 matters: the kernel does not deliver signals to a namespace's init unless it has a
handler, so a job that kills every process it can (``kill(-1, SIGKILL)``) cannot take the agent
down. The agent also makes itself non-dumpable so that jobs (same uid) cannot ptrace it or open
``/proc/1/fd/*`` to forge frames.
"""

import base64
import contextlib
import errno
import json
import os
import resource
import selectors
import signal
import stat
import struct
import sys
import threading
import time

SCRATCH = "/scratch"
SHM = "/dev/shm"
MQUEUE = "/dev/mqueue"  # the POSIX message queues of the container's IPC namespace
MAIN = "main.py"
CHUNK = 65536
TERM_GRACE_S = 0.1
ZYGOTE_REPLY_S = 10.0  # the zygote's hello, and a job's pid once the zygote has its inputs
# A job may stop the zygote before it says "ok" (the job already runs): it is woken this often,
# this many times, before the container is retired (the host waits for the reply meanwhile).
SPAWN_NUDGE_S, SPAWN_NUDGES = 0.1, 20  # 2 s at most: well within worker.REPLY_GRACE_S
JOB_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH,
    "TMPDIR": SCRATCH,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


def _nondumpable():
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        return True
    except Exception:
        return False


def _read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class HostGone(Exception):
    """The host closed the channel: the agent exits (and the engine removes the container)."""


class Input:
    """The job's input bytes that follow its request frame on fd 0: read exactly, never more,
    and never held whole (the program, files and stdin may be larger than our memory)."""

    def __init__(self, size):
        self.left = size

    def read(self, limit):
        chunk = os.read(0, min(limit, self.left))
        if not chunk:
            raise HostGone()
        self.left -= len(chunk)
        return chunk

    def discard(self):
        while self.left:
            self.read(1 << 20)


def _write_inputs(specs, source):
    """Copy each (name, size) from ``source`` into the scratch space; return an error or None.
    Everything is read from the channel even after an error, so the next frame stays in step."""
    error = None
    for name, size in specs:
        fh = None
        if error is None:
            try:
                path = os.path.join(SCRATCH, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fh = open(path, "wb")  # noqa: SIM115 - closed below, after the copy
            except OSError as exc:
                error = f"cannot write job file {name}: {exc}"
        left = size
        while left:
            chunk = source.read(min(left, 1 << 20))
            left -= len(chunk)
            if fh is not None:
                try:
                    fh.write(chunk)
                except OSError as exc:
                    error = f"cannot write job file {name}: {exc}"
                    fh = None
        if fh is not None:
            try:
                fh.close()
            except OSError as exc:
                error = f"cannot write job file {name}: {exc}"
    return error


def _send(obj):
    data = json.dumps(obj).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(1, view):]


def _oom_kills():
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


def _kill_all(zygote_pid):
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


class _OverBudget(Exception):
    """The clean-up met more than it may handle: the container is not trusted any more."""


class _Budget:
    """What one clean-up may spend: ``entries`` directory entries and ``seconds`` in all."""

    def __init__(self, entries, seconds):
        self.left = entries
        self.end = time.monotonic() + seconds

    def take(self):
        self.left -= 1
        if self.left < 0 or (self.left % 256 == 0 and time.monotonic() > self.end):
            raise _OverBudget()


# A directory is opened only as a directory (a fifo or a device is never opened, a link never
# followed), and its descriptor is not inherited by anything.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _empty(root, budget):
    """Remove everything under ``root``; False when something stayed. Raises ``_OverBudget``.

    Depth-first without recursion, through directory descriptors: any depth and any path length
    (names are never joined into paths), one descriptor open at a time (the way back up is
    "..", checked to be the directory we came from), links unlinked and never followed, and a
    directory made ours (0o700) before it is read. Nothing of the job runs any more, so the tree
    holds still while it is walked.
    """
    fd = os.open(root, _DIR_FLAGS)
    device = os.fstat(fd).st_dev
    clean = True
    above = []  # per level above ``fd``: (name of the one below, its (dev, ino), dirs left)
    subdirs = None
    try:
        while True:
            if subdirs is None:  # a directory just entered: its files go, its dirs wait
                names = []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        budget.take()
                        names.append((entry.name, entry.is_dir(follow_symlinks=False)))
                subdirs = []
                for name, is_dir in names:
                    if is_dir:
                        subdirs.append(name)
                        continue
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        clean = False
            if subdirs:
                name = subdirs.pop()
                try:
                    os.chmod(name, 0o700, dir_fd=fd)  # a directory (d_type), nothing moves
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    clean = False
                    continue
                if os.fstat(child).st_dev != device:  # jobs cannot mount: never seen
                    os.close(child)
                    clean = False
                    continue
                here = os.fstat(fd)
                above.append((name, (here.st_dev, here.st_ino), subdirs))
                os.close(fd)
                fd, subdirs = child, None
                continue
            if not above:
                return clean
            name, parent, subdirs = above.pop()
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != parent:
                return False
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                clean = False
    finally:
        os.close(fd)


def _reset_root(root, mode):
    """Give a wiped root back its mode and no extended attributes or chosen times (a job owns
    ``/scratch`` itself, and could leave a note there for the next job); False when it cannot."""
    try:
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode):
            return False
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(root, mode)
        for name in os.listxattr(root, follow_symlinks=False):
            os.removexattr(root, name, follow_symlinks=False)
        if st.st_uid == os.getuid():
            os.utime(root)
        return True
    except OSError:
        return False


def _wipe(roots, budget):
    """Empty every (root, mode) of ``roots`` and the message queues; 0 when all is clean, 1 when
    something stayed, 2 when the budget ran out."""
    clean = True
    try:
        for root, mode in roots:
            # A root the job made unreadable is given back its mode before it is read.
            clean = _reset_root(root, mode) and clean
            try:
                clean = _empty(root, budget) and clean
            except OSError:
                clean = False
            clean = _reset_root(root, mode) and clean
        clean = _clear_mqueues(budget) and clean
    except _OverBudget:
        return 2
    return 0 if clean else 1


WIPE_ENTRIES = 20_000  # more than both tmpfs mounts' inodes and the queues: never met honestly
CLEAN_UP_S = 3.0  # well within the host's grace for a reply (worker.REPLY_GRACE_S)
#: Why a clean-up was not trusted, by what ``_wipe`` returned.
_UNTRUSTED = {1: "the job left files the agent could not remove",
              2: f"the job left more than {WIPE_ENTRIES} entries (or more than the agent can "
                 f"remove in {CLEAN_UP_S:g} s)"}


CLEAN_UP_STACK = 16 << 20  # the clean-up thread's own stack, whatever the agent's is
_retiring = False  # a clean-up was abandoned: the agent exits once it has replied


def _clean_up(roots):
    """Empty the writable places on a thread of its own, with a fixed stack of its own, and
    wait for it at most until a deadline. Returns None when all is clean, else why not. A
    clean-up still running at the deadline is abandoned: the container is no longer trusted,
    and the agent exits after its reply (``_retiring``), which ends the thread too.
    """
    global _retiring
    done = []

    def work():
        try:
            done.append(_wipe(roots, _Budget(WIPE_ENTRIES, CLEAN_UP_S)))
        except BaseException as exc:  # noqa: BLE001 - reported, whatever it is
            done.append(exc)

    previous = threading.stack_size(CLEAN_UP_STACK)
    try:
        thread = threading.Thread(target=work, name="clean-up", daemon=True)
        thread.start()
    except RuntimeError as exc:  # no thread to be had: nothing was cleaned
        return f"cannot start the clean-up: {_short(exc)}"
    finally:
        threading.stack_size(previous)
    thread.join(CLEAN_UP_S + 1.0)
    if not done:
        _retiring = True
        return f"the clean-up did not finish in {CLEAN_UP_S + 1.0:g} s"
    code = done[0]
    if isinstance(code, BaseException):
        return f"the clean-up failed: {_short(code)}"
    return _UNTRUSTED.get(code) if code else None


def _clear_mqueues(budget):
    """Unlink every POSIX message queue (they outlive their creator); False when one stayed."""
    try:
        names = os.listdir(MQUEUE)
    except FileNotFoundError:
        return True  # not mounted: jobs cannot create queues (see ``main``)
    except OSError:
        return False
    ok = True
    for name in names:
        budget.take()
        try:
            os.unlink(os.path.join(MQUEUE, name))
        except OSError:
            ok = False
    return ok


def _sysv_ipc_used():
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

    def __init__(self, zygote_pid):
        self.zygote_pid = zygote_pid
        self.sockets = _socket_counts()
        self.states = {pid: _process_state(pid) for pid in (os.getpid(), zygote_pid)}
        # The places a job can write, with the modes the clean-up gives them back.
        self.roots = [(root, stat.S_IMODE(os.lstat(root).st_mode)) for root in (SCRATCH, SHM)
                      if os.path.isdir(root)]

    def changed(self):
        # With no process left, a socket survives only in flight (a unix socket passed in a
        # socket's queue, keeping alive whatever files it carries) or closing (TCP); a closed
        # TCP socket then keeps its port in TIME_WAIT, where a later job binding it fails.
        sockets = _socket_counts()
        return (sockets is None or sockets != self.sockets
                or any(_process_state(pid) != state for pid, state in self.states.items()))


# What jobs may not call, on top of the engine's seccomp profile (the zygote installs it, so the
# agent keeps its own rights). io_setup draws on a quota that is one for the whole host
# (fs.aio-max-nr); the others would change another process of the same uid, such as the agent
# (making the job's own run read as an infrastructure failure) or the zygote (and so every later
# job): its rlimits, priorities, scheduling, or name it as the owner of a file's I/O signals
# (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG; ioctl FIOSETOWN, SIOCSPGRP on a socket), with which
# O_ASYNC sends it any signal the job likes. Rules: call name -> None (always EPERM), a tuple of
# argument indexes of which any non-zero one makes it EPERM (a pid, or "who", of 0 is the
# caller itself), or {argument index: values} of which any one makes it EPERM.
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
_SET_OWNER = {1: (F_SETOWN, F_SETSIG, F_SETOWN_EX)}
DENIED = {"io_setup": None, "ioprio_set": None, "prlimit64": (0,), "setpriority": (0, 1),
          "sched_setparam": (0,), "sched_setscheduler": (0,), "sched_setaffinity": (0,),
          "sched_setattr": (0,), "fcntl": _SET_OWNER, "fcntl64": _SET_OWNER,
          "ioctl": {1: (FIOSETOWN, SIOCSPGRP)}}
_NAMES = ("io_setup", "ioprio_set", "prlimit64", "setpriority", "sched_setparam",
          "sched_setscheduler", "sched_setaffinity", "sched_setattr", "fcntl", "fcntl64", "ioctl")
_X32 = 0x40000000
# Per audit arch, the numbers of ``_NAMES`` in each ABI a job can reach (None: not in it): on
# x86-64 that includes x32 (same arch, numbers with bit 30 set) and i386 (int 0x80 from 64-bit
# code).
SYSCALL_NUMBERS = {
    0xC000003E: [(206, 251, 302, 141, 142, 144, 203, 314, 72, None, 16),
                 tuple(_X32 | n for n in (543, 251, 302, 141, 142, 144, 203, 314, 72))
                 + (None, _X32 | 514)],
    0x40000003: [(245, 289, 340, 97, 154, 156, 241, 351, 55, 221, 54)],
    0xC00000B7: [(0, 30, 261, 140, 118, 119, 122, 274, 25, None, 29)],
}


def seccomp_program(denied=None, numbers=None):
    """A classic-BPF seccomp program (bytes) that fails ``denied`` calls with EPERM and allows
    everything else; unknown architectures are not filtered."""
    denied = DENIED if denied is None else denied
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000  # SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW
    prog = []
    for arch, abis in (SYSCALL_NUMBERS if numbers is None else numbers).items():
        body = []
        for abi in abis:
            for name, nr in zip(_NAMES, abi, strict=True):
                if nr is None or name not in denied:
                    continue
                rule = denied[name]
                if rule is None:
                    body += [(ld, 0, 0, 0), (jeq, 0, 1, nr), (ret, 0, 0, deny)]
                elif isinstance(rule, dict):  # the low 32 bits: the kernel reads an int here
                    for arg, values in rule.items():
                        for value in values:
                            body += [(ld, 0, 0, 0), (jeq, 0, 3, nr), (ld, 0, 0, 16 + 8 * arg),
                                     (jeq, 0, 1, value), (ret, 0, 0, deny)]
                else:  # the low 32 bits of the argument (pids and "who" are ints)
                    for arg in rule:
                        body += [(ld, 0, 0, 0), (jeq, 0, 3, nr), (ld, 0, 0, 16 + 8 * arg),
                                 (jeq, 1, 0, 0), (ret, 0, 0, deny)]
        # seccomp_data: nr at offset 0, arch at 4, args from 16 (8 bytes each, little-endian).
        if len(body) + 1 > 255:
            raise ValueError("seccomp program: too many rules for one arch (8-bit jumps)")
        prog += [(ld, 0, 0, 4), (jeq, 0, len(body) + 1, arch), *body, (ret, 0, 0, allow)]
    prog.append((ret, 0, 0, allow))
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)


# The zygote: a pristine interpreter, started once per container, that never runs job code
# nor sees job data. For each job it forks A, A forks B and exits, so B (the job, a fresh process
# with the zygote's clean state) is re-parented to the agent, which waits for it. That saves the
# interpreter start-up (most of a trivial job's cost) without sharing anything between jobs.
ZYGOTE = r"""
import atexit, os, resource, signal, socket, sys, types
try:
    import ctypes
    _prctl = ctypes.CDLL(None).prctl
    _prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: jobs cannot ptrace the zygote
except Exception:
    _prctl = None
ctl = socket.socket(fileno=3)

def _seccomp(code):
    # The jobs' syscall filter (the agent's DENIED), inherited by every job forked from here.
    try:
        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        buf = ctypes.create_string_buffer(code, len(code))
        prog = Fprog(len(code) // 8, ctypes.addressof(buf))
        prctl, arg = ctypes.CDLL(None).prctl, ctypes.c_ulong
        prctl(38, arg(1), arg(0), arg(0), arg(0))  # PR_SET_NO_NEW_PRIVS (the engine's is on too)
        return prctl(22, arg(2), ctypes.byref(prog), arg(0), arg(0)) == 0  # SECCOMP_MODE_FILTER
    except Exception:
        return False

ctl.send(b"ready %d" % _seccomp(bytes.fromhex(sys.argv[1])))

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
    os.chdir("/scratch")
    path = "/scratch/main.py"
    sys.argv[:] = [path]
    sys.path[0] = "/scratch"
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = __builtins__
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
            try:
                print(code, file=sys.stderr)
            except Exception:
                pass
            code = 1
    except BaseException as exc:
        tb = None if isinstance(exc, SyntaxError) else exc.__traceback__.tb_next
        try:
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        except BaseException:
            pass
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 0xFF)

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
                    # Start once our short-lived parent has exited (we are then the agent's):
                    # the job must not see it half-gone in /proc.
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
"""


class Zygote:
    def __init__(self):
        import socket

        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.dup2(theirs.fileno(), 3)
                os.closerange(4, 65536)
                os.execve(sys.executable, [sys.executable, "-B", "-E", "-s", "-c", ZYGOTE,
                                           seccomp_program().hex()], JOB_ENV)
            finally:
                os._exit(127)
        theirs.close()
        self.out_of_step = False  # an "ok" is owed that never came: the container must go
        self.sock.settimeout(ZYGOTE_REPLY_S)
        try:
            hello = self.sock.recv(64)
        except OSError:
            hello = b""
        # Without the filter, jobs could reach the agent and the zygote: refuse to start.
        self.filtered = hello == b"ready 1"
        self.ready = self.filtered and self.alive()

    def alive(self):
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def spawn(self, req, fds):
        """Start a job; return its pid (our child) or None when the zygote failed."""
        import socket

        cpu = max(1, int(req["cpu_s"] + 0.999))
        disk = int(req["disk_mb"]) * 1024 * 1024
        try:
            socket.send_fds(self.sock, [b"%d %d" % (cpu, disk)], fds)
            pid, ok, nudges = None, False, 0
            while pid is None or not ok:
                try:
                    msg = self.sock.recv(64)
                except TimeoutError:
                    if pid is None:
                        raise
                    # The job runs (it sent its pid) and stopped the zygote before the zygote
                    # said "ok". Saying "not started" here would let a job turn its grade into
                    # a retry and then an infrastructure error: wake the zygote instead.
                    nudges += 1
                    if nudges > SPAWN_NUDGES:
                        self.out_of_step = True  # its "ok" may still come: retire it
                        return pid
                    os.kill(self.pid, signal.SIGCONT)
                    continue
                if not msg:
                    # The zygote is gone (a job may kill it at once); the job still runs.
                    return pid
                if msg == b"ok":
                    ok = True
                elif msg.startswith(b"pid "):
                    pid = int(msg[4:])
                    self.sock.settimeout(SPAWN_NUDGE_S)  # from here on, only "ok" is awaited
            return pid
        except (OSError, ValueError):
            return None
        finally:
            self.sock.settimeout(ZYGOTE_REPLY_S)


def _try_wait(pid):
    """(status, rusage) once the job has exited, else None. Until its short-lived parent in the
    zygote has exited, the job is not yet our child; that also reads as "not yet"."""
    try:
        got, status, rusage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return (status, rusage) if got == pid else None


def _wait(pid, timeout):
    end = time.monotonic() + timeout
    while True:
        done = _try_wait(pid)
        if done is not None or time.monotonic() > end:
            return done
        time.sleep(0.002)


def _set_nonblocking(fd):
    os.set_blocking(fd, False)


def run_job(req, zygote, baseline):
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
    except HostGone:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the job's code had run
        # The job ran, so it may be what broke us: this is its verdict, never the host's.
        with contextlib.suppress(OSError):
            stdin.discard()  # the host sends all of it before it reads the reply
        reply = _verdict("dirty_container", f"agent: {_short(exc)}", time.monotonic() - start)
    return _settle(reply, zygote, baseline)


def _spawn(req, zygote):
    """The job's files written from the channel and the job started in the zygote: (pid, its
    stdin still to relay, the pipes' ends, the OOM kill count before it), or the reply when it
    could not start. Before any job code ran, a failure is not the job's doing and safe to
    retry on another container (``started: False``)."""
    specs = [(MAIN, int(req["code_bytes"]))] + [(n, int(b)) for n, b in req.get("files") or []]
    source = Input(sum(size for _, size in specs))
    error = _write_inputs(specs, source)
    stdin = Input(int(req.get("stdin_bytes") or 0))
    if error is not None:  # the host checked that the inputs fit
        stdin.discard()
        return {"status": "sandbox_error", "error": error, "dirty": True, "started": False}
    oom_before = _oom_kills()
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


def _short(exc, limit=300):
    text = repr(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def _watch(req, zygote, pid, stdin, stdin_w, out_r, err_r, start, oom_before):
    """The job's run, phase by phase: pump (relay stdin, collect the output until the job
    exits or hits a limit), stop (a job still running is terminated, then killed), then its
    status. The reply; ``_settle`` adds whether the container can be trusted."""
    relay = _Relay(req, pid, stdin, stdin_w, out_r, err_r, start)
    relay.pump()
    if relay.wait_status is None:  # a timeout or the output limit
        relay.wait_status, relay.rusage = _stop(pid)
    leftover = _kill_all(zygote.pid)
    # A job may have stopped the zygote (same uid): resume it, which also drops a stop signal
    # still pending, or the next job would never start.
    with contextlib.suppress(OSError):
        os.kill(zygote.pid, signal.SIGCONT)
    relay.close()
    wall_s = time.monotonic() - start
    stdin.discard()  # what the job did not read, so that the next frame stays in step
    return _reply(req, relay, wall_s, leftover, oom_before)


class _Relay:
    """The pipes of a running job: stdin relayed from the channel (fd 0) one chunk at a time
    (a chunk is read when none is pending, written when the pipe has room), stdout and stderr
    collected up to ``output_bytes``; ``status`` is set when a limit is hit, ``wait_status``
    once the job has exited."""

    def __init__(self, req, pid, stdin, stdin_w, out_r, err_r, start):
        self.pid, self.stdin, self.stdin_w = pid, stdin, stdin_w
        self.out_r, self.err_r = out_r, err_r
        self.cap = int(req["output_bytes"])
        self.deadline = start + float(req["wall_s"])
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        self.sel = selectors.DefaultSelector()
        self.outputs = {out_r: bytearray(), err_r: bytearray()}
        for fd in (out_r, err_r):
            _set_nonblocking(fd)
            self.sel.register(fd, selectors.EVENT_READ)
        self.pending = memoryview(b"")
        self.feeding = True
        if stdin.left:
            _set_nonblocking(stdin_w)
            self.sel.register(0, selectors.EVENT_READ)
        else:
            os.close(stdin_w)
            self.stdin_w = None
        if self.pidfd is not None:
            self.sel.register(self.pidfd, selectors.EVENT_READ)
        self.status = None
        self.truncated = False
        self.wait_status = self.rusage = None

    def pump(self):
        """Until the job exits (its pipes then drained, without waiting for processes it left
        behind: they are killed after), hits the output limit or runs out of wall time."""
        while True:
            if self.wait_status is None:
                done = _try_wait(self.pid)
                if done is not None:
                    self.wait_status, self.rusage = done
            open_reads = [fd for fd in self.outputs if fd in self.sel.get_map()]
            if self.wait_status is not None:
                for fd in open_reads:
                    self.drain(fd)
                return
            if self.status is not None:
                return
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                self.status = "timeout"
                return
            if self.pidfd is None:
                timeout = min(timeout, 0.005)
            for key, _ in self.sel.select(timeout):
                self.ready(key.fd)
                if self.status is not None:
                    break

    def ready(self, fd):
        if fd == self.pidfd:
            self.sel.unregister(fd)
            os.close(fd)
            self.pidfd = None
            done = _wait(self.pid, 5.0)
            if done is not None:
                self.wait_status, self.rusage = done
        elif fd == 0:
            self.pending = memoryview(self.stdin.read(CHUNK))
            self.sel.unregister(0)
            self.sel.register(self.stdin_w, selectors.EVENT_WRITE)
        elif fd == self.stdin_w:
            self.feed()
        elif fd in self.outputs:
            self.drain(fd)

    def feed(self):
        try:
            self.pending = self.pending[os.write(self.stdin_w, self.pending):]
        except BlockingIOError:
            return
        except OSError:  # the job closed its stdin: the rest is discarded by the caller
            self.pending = self.pending[:0]
            self.feeding = False
        if not self.pending:
            self.sel.unregister(self.stdin_w)
            if self.feeding and self.stdin.left:
                self.sel.register(0, selectors.EVENT_READ)
            else:
                os.close(self.stdin_w)
                self.stdin_w = None

    def drain(self, fd):
        """Read what ``fd`` holds; False once it is closed or over the output limit."""
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                self.sel.unregister(fd)
                os.close(fd)
                return False
            buf = self.outputs[fd]
            room = self.cap - len(buf)
            if len(chunk) > room:
                buf += chunk[:max(room, 0)]
                self.truncated = True
                self.status = "output_limit"
                return False
            buf += chunk

    def close(self):
        for fd in list(self.sel.get_map()):
            try:
                self.sel.unregister(fd)
                if fd not in (0, self.stdin_w):  # the channel stays open; stdin_w is closed below
                    os.close(fd)
            except (OSError, KeyError, ValueError):
                pass
        self.sel.close()
        if self.stdin_w is not None:
            with contextlib.suppress(OSError):
                os.close(self.stdin_w)


def _stop(pid):
    """(status, rusage) of a job that is still running: its group is asked to stop (SIGTERM,
    ``TERM_GRACE_S``), then everything in it is killed."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGTERM)
    done = None
    end = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < end:
        done = _try_wait(pid)
        if done is not None:
            break
        time.sleep(0.005)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if done is None:
        done = _wait(pid, 5.0)
    # Never seen exiting (it cannot outlive SIGKILL): report it as killed.
    return done if done is not None else (signal.SIGKILL, None)


def _reply(req, relay, wall_s, leftover, oom_before):
    """The job's verdict from how it ended; a limit hit, an OOM kill or processes left behind
    cost the container (``dirty``)."""
    rusage, wait_status = relay.rusage, relay.wait_status
    cpu_s = (rusage.ru_utime + rusage.ru_stime) if rusage is not None else 0.0
    signaled = os.WIFSIGNALED(wait_status)
    code = -os.WTERMSIG(wait_status) if signaled else os.WEXITSTATUS(wait_status)
    oom = _oom_kills() > oom_before >= 0
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
        leftover = _kill_all(zygote.pid)
        with contextlib.suppress(OSError):
            os.kill(zygote.pid, signal.SIGCONT)
        why = _clean_up(baseline.roots)
        dirty = (leftover or why is not None or not zygote.alive() or zygote.out_of_step
                 or _sysv_ipc_used()
                 or baseline.changed())
    except Exception as exc:  # noqa: BLE001 - the job's doing, as far as anyone can tell
        why = f"agent: {_short(exc)}"
        dirty = True
    if why is not None:
        if reply.get("status") in ("ok", "runtime_error"):
            reply["status"] = "dirty_container"
        reply["error"] = why
    reply["dirty"] = bool(reply.get("dirty") or dirty)
    return reply


def main():
    # As PID 1 only signals with a handler reach us; make sure none has one (Python installs
    # one for SIGINT), so no job can interrupt the agent.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    dumpable_off = _nondumpable()
    if not os.path.isdir(MQUEUE):
        # Queues we cannot list (nor remove) must not exist: their quota is then 0 bytes.
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    zygote = Zygote()
    baseline = Baseline(zygote.pid)
    _send({"ready": zygote.ready, "pid": os.getpid(), "nondumpable": dumpable_off,
           "syscall_filter": zygote.filtered, "oom_counter": _oom_kills() >= 0})
    while True:
        try:
            head = _read_exact(0, 4)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            return
        if head is None:
            return
        body = _read_exact(0, struct.unpack(">I", head)[0])
        if body is None:
            return
        req = json.loads(body)
        try:
            reply = run_job(req, zygote, baseline)
        except HostGone:
            return
        except Exception as exc:  # report, then let the host discard this container
            reply = {"status": "sandbox_error", "error": f"agent: {exc!r}", "dirty": True}
        reply["id"] = req.get("id")
        _send(reply)
        if _retiring:
            return


if __name__ == "__main__":
    main()
