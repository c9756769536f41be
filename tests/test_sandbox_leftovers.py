"""What a job leaves behind in its own container never becomes an infrastructure error.

A job may leave any state in the places it can write (``/scratch``, ``/dev/shm``): deep, wide,
oddly named, linked, locked-down, held open, fifos, read-only, full. The agent's clean-up is
iterative, bounded and runs on a thread of its own with a fixed stack; what it cannot clean or
check is the job's own verdict, ``dirty_container`` (a failure), and the container is
replaced. Each kind of state gets a test on the real engine: the job's status is its ordinary
failure (or ``dirty_container``), never ``sandbox_error``, and the next job finds a pristine
container.
The clean-up's walk itself is also tested on this machine's file system, beyond what a job's
tmpfs could hold.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

import sandbox.worker
from sandbox import Limits, Sandbox
from sandbox.bundle import INSIDE, compact, module_source, program
from sandbox.harness import read_reports
from sandbox.inside import clean_up, layout
from sandbox.inside.clean_up import Budget, OverBudget, empty, wipe
from sandbox.limits import INFRA_STATUSES, PROGRAM_STATUSES, RunResult
from sandbox.worker import JobInput, Worker, writable_mb

docker = pytest.mark.docker
QUICK = Limits(wall_s=8.0, cpu_s=8.0)
WRONG = 3  # every hostile job exits with this code after planting: a wrong program

# A chain of ``levels`` directories under ``root``, made through handles (no path grows); the
# descriptor of the deepest is returned. Jobs in the container and the host-side walk test use
# this one source.
DEEP = '''\
def deep(root, levels, name="d"):
    fd = os.open(root, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        new = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    return fd
'''

PRELUDE = """\
import ctypes, errno, fcntl, os, signal, sys, time
def wrong():
    print("planted")
    sys.stdout.flush()
    os._exit(3)
def fill(directory):
    n = 0
    try:
        while True:
            os.close(os.open(os.path.join(directory, "i%d" % n), os.O_CREAT | os.O_WRONLY))
            n += 1
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    return n
""" + DEEP

# What a pristine container shows a job: only its program, empty shared memory and queues,
# the scratch space's own mode and no extended attributes, all of its space free.
PROBE = PRELUDE + """
st = os.statvfs("/scratch")
print(sorted(os.listdir("/scratch")), os.listdir("/dev/shm"), os.listdir("/dev/mqueue"),
      oct(os.stat("/scratch").st_mode & 0o7777), os.listxattr("/scratch"),
      st.f_bfree >= st.f_blocks - 2, st.f_ffree >= st.f_files - 4)
with open("/scratch/mine", "w") as fh:
    fh.write("x")
"""
PRISTINE = "['main.py'] [] [] 0o755 [] True True\n"


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=2) as sandbox:
        yield sandbox


def _probe(worker: Worker) -> tuple[str, bool]:
    result, reusable = worker.run(JobInput.of(PROBE, "", None, QUICK), QUICK)
    assert result.status == "ok", result
    return result.stdout, reusable


def leave_behind(sb: Sandbox, code: str, limits: Limits = QUICK):
    """Run ``code`` (after ``PRELUDE``) in a warm container; return its result, whether the
    host kept the container, and what the next job then sees (in the same container when it
    was kept, else in the pool's next one)."""
    worker = sb._pool.acquire(limits)
    reusable = False
    try:
        before, reusable = _probe(worker)
        assert before == PRISTINE and reusable
        reusable = False
        result, kept = worker.run(JobInput.of(PRELUDE + code, "", None, limits), limits)
        after = None
        if kept:
            after, reusable = _probe(worker)
    finally:
        sb._pool.release(worker, reusable)
    if after is None:  # the container was replaced: the pool's next one is pristine too
        nxt = sb.run(PROBE, limits=limits)
        assert nxt.status == "ok", nxt
        after = nxt.stdout
    return result, kept, after


def assert_ordinary(sb: Sandbox, code: str, *, kept: bool | None = True,
                    limits: Limits = QUICK) -> None:
    """The job's own failure (its exit code) is its verdict, and the next job is pristine."""
    result, reusable, after = leave_behind(sb, code, limits)
    assert result.status not in INFRA_STATUSES, result
    assert result.status == "runtime_error" and result.exit_code == WRONG, result
    assert result.stdout == "planted\n", result
    if kept is not None:
        assert reusable is kept, result
    assert after == PRISTINE, after


# -- each kind of state a job can leave ---------------------------------------------------------

@docker
def test_depth_thousands_of_nested_directories(sb):
    # The case: about 1,200 levels made the recursive clean-up raise RecursionError,
    # which came back as sandbox_error. Here 1,500 in each writable place.
    assert_ordinary(sb, "deep('/scratch', 1500)\ndeep('/dev/shm', 1500)\nwrong()\n")


@docker
def test_depth_with_paths_longer_than_path_max(sb):
    # 255-byte names, 60 levels: a 15 KB path, which no path-based call can name.
    assert_ordinary(sb, "deep('/scratch', 60, 'n' * 255)\nos.chdir('/scratch')\n"
                        "deep('/dev/shm', 60, 'm' * 255)\nwrong()\n")


@docker
def test_width_every_inode_of_both_places(sb):
    assert_ordinary(sb, "assert fill('/scratch') > 4000\nassert fill('/dev/shm') > 4000\nwrong()\n")


@docker
def test_odd_names(sb):
    code = """
names = [b"new\\nline", b"\\xff\\xfe\\x80", b"\\x01\\x1b[2J", b"-rf", b" ", b"...", b"*",
         b"\\\\", "é".encode() * 127, b"z" * 255, "\\u202e".encode()]
for root in (b"/scratch", b"/dev/shm"):
    for n in names:
        if n:
            os.close(os.open(root + b"/" + n, os.O_CREAT | os.O_WRONLY))
    os.mkdir(root + b"/\\n\\xff")
    os.close(os.open(root + b"/\\n\\xff/" + b"\\xc3", os.O_CREAT | os.O_WRONLY))
wrong()
"""
    assert_ordinary(sb, code)


@docker
def test_links_loops_and_links_pointing_outside(sb):
    code = """
os.chdir("/scratch")
os.symlink("self", "self")
os.symlink("b", "a"); os.symlink("a", "b")
os.mkdir("d"); os.symlink("..", "d/up"); os.symlink("/scratch", "d/root")
os.symlink("/", "slash"); os.symlink("/proc/1/cwd", "agent_cwd"); os.symlink("/etc", "etc")
os.symlink("/dev/shm", "shm"); os.symlink("/nowhere", "dangling")
os.link("main.py", "hard")
os.symlink("/scratch", "/dev/shm/back"); os.symlink("/dev/shm/back", "/dev/shm/chain")
fd = deep("/scratch/d", 200)
os.symlink("/scratch/d", "loop", dir_fd=fd)
wrong()
"""
    assert_ordinary(sb, code)
    # Nothing a link pointed at outside the writable places was touched.
    r = sb.run("import os\nprint(os.path.isfile('/etc/hostname'), len(os.listdir('/etc')) > 5)")
    assert r.stdout == "True True\n", r


@docker
def test_permissions_locked_directories_files_and_the_scratch_root(sb):
    code = """
for root in ("/scratch", "/dev/shm"):
    os.makedirs(root + "/a/b/c")
    for d in ("/a/b/c", "/a/b", "/a"):
        with open(root + d + "/f", "w") as fh:
            fh.write("x")
        os.chmod(root + d + "/f", 0)
    os.chmod(root + "/a/b/c", 0)
    os.chmod(root + "/a/b", 0o100)  # search only
    os.chmod(root + "/a", 0o500)  # read-only
os.setxattr("/scratch", "user.note", b"for the next job")
os.utime("/scratch", (1, 1))
os.chmod("/scratch", 0)  # the root itself: unreadable, and no file can be made in it
wrong()
"""
    assert_ordinary(sb, code)


@docker
def test_open_descriptors_held_by_a_background_child(sb):
    # A daemon outlives the job holding files (deleted and not, locked, being written), its
    # cwd deep in a tree, and the job's own output pipe; the job's verdict stays its own.
    code = """
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = deep("/scratch", 300)
        os.fchdir(fd)
        held = [os.open("/scratch/held%d" % i, os.O_CREAT | os.O_RDWR) for i in range(50)]
        fcntl.flock(held[0], fcntl.LOCK_EX)
        gone = os.open("/dev/shm/gone", os.O_CREAT | os.O_RDWR)
        os.unlink("/dev/shm/gone")
        os.write(w, b"x")
        while True:
            os.write(held[1], b"y" * 4096)
            os.lseek(held[1], 0, 0)
            time.sleep(0.001)
    os._exit(0)
os.read(r, 1)
wrong()
"""
    assert_ordinary(sb, code, kept=False)  # a process outlived the job: the container goes


@docker
def test_fifos_with_and_without_a_blocked_reader(sb):
    code = """
for root in ("/scratch", "/dev/shm"):
    os.mkfifo(root + "/p")
    os.mkdir(root + "/dir")
    os.mkfifo(root + "/dir/p")
    os.chmod(root + "/dir", 0)
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, b"x")
    open("/scratch/p").read()  # blocks: nobody writes
os.read(r, 1)
wrong()
"""
    assert_ordinary(sb, code, kept=False)


@docker
def test_immutable_looking_files(sb):
    # chattr +i needs a capability the job lacks: it fails; read-only files in read-only
    # (and sticky) directories are what the job can make instead.
    code = """
FS_IOC_SETFLAGS, FS_IMMUTABLE_FL, FS_APPEND_FL = 0x40086602, 0x10, 0x20
for root in ("/scratch", "/dev/shm"):
    os.makedirs(root + "/ro/inner")
    for d in ("/ro/inner", "/ro"):
        with open(root + d + "/f", "w") as fh:
            fh.write("x")
            try:
                fcntl.ioctl(fh, FS_IOC_SETFLAGS, ctypes.c_long(FS_IMMUTABLE_FL | FS_APPEND_FL))
                print("immutable set!")
            except OSError:
                pass
        os.chmod(root + d + "/f", 0o444)
    os.chmod(root + "/ro/inner", 0o1555)
    os.chmod(root + "/ro", 0o555)
wrong()
"""
    assert_ordinary(sb, code)


@docker
def test_a_full_disk_and_full_shared_memory(sb):
    code = """
for root in ("/scratch", "/dev/shm"):
    try:
        with open(root + "/big", "wb") as fh:
            while True:
                fh.write(b"x" * (1 << 20))
    except OSError as exc:
        assert exc.errno in (errno.ENOSPC, errno.EFBIG), exc
    fill(root)
wrong()
"""
    assert_ordinary(sb, code)


@docker
def test_a_full_disk_in_a_small_memory_limit_does_not_starve_the_agent(sb):
    # The scratch space and /dev/shm are memory: with memory_mb=64 and disk_mb=64, filling them
    # used to leave the agent nothing and the out-of-memory killer took it (sandbox_error).
    small = Limits(wall_s=8.0, cpu_s=8.0, memory_mb=64, disk_mb=64)
    scratch, shm = writable_mb(small)
    assert scratch + shm <= 64 - sandbox.worker.AGENT_RESERVE_MB
    code = """
for root in ("/scratch", "/dev/shm"):
    try:
        with open(root + "/big", "wb") as fh:
            while True:
                fh.write(b"x" * (1 << 20))
    except OSError as exc:
        assert exc.errno in (errno.ENOSPC, errno.EFBIG), exc
wrong()
"""
    for _ in range(2):
        assert_ordinary(sb, code, kept=None, limits=small)


@docker
def test_everything_at_once(sb):
    code = """
fd = deep("/scratch", 400, "\\n" * 200)
os.mkfifo("p", dir_fd=fd)
os.symlink("/scratch", "up", dir_fd=fd)
os.chmod("/scratch/" + "\\n" * 200, 0)
deep("/dev/shm", 800)
fill("/dev/shm")
wrong()
"""
    assert_ordinary(sb, code)


# -- what the agent cannot clean or check is the job's verdict ---------------------------------

def _agent_with(monkeypatch, module: str, old: str, new: str) -> None:
    """New containers run an agent whose ``sandbox/inside/<module>.py`` has ``old`` replaced."""
    text = (INSIDE / f"{module}.py").read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    sources = {name: module_source(name) for name in sandbox.worker.AGENT_MODULES}
    sources[module] = compact(text.replace(old, new))
    monkeypatch.setattr(sandbox.worker, "AGENT_SOURCE", program("agent", sources))


def _one_container(limits: Limits):
    return Sandbox(pool_size=1, limits=limits)


@docker
def test_beyond_the_clean_up_budget_the_job_fails_as_dirty_container(monkeypatch):
    # No job can reach the real budget (the tmpfs inodes run out first): an agent with a small
    # one shows the path end to end.
    _agent_with(monkeypatch, "clean_up", "WIPE_ENTRIES = 20_000", "WIPE_ENTRIES = 300")
    with _one_container(QUICK) as own:
        hostile = PRELUDE + "for i in range(400):\n    open('/dev/shm/f%d' % i, 'w').close()\n"
        for code in (hostile + "wrong()\n", hostile + "print('planted')\n"):  # wrong and right
            r = own.run(code)
            assert r.status == "dirty_container" and r.stdout == "planted\n", r
            assert "more than 300 entries" in r.error and not r.ok, r
            nxt = own.run(PROBE)
            assert nxt.status == "ok" and nxt.stdout == PRISTINE, nxt


@docker
def test_an_agent_broken_by_the_job_state_is_the_jobs_verdict(monkeypatch):
    # The failure in kind: the clean-up raising (as the recursive one did) must not be
    # a sandbox_error, wherever in the reply path it happens.
    _agent_with(monkeypatch, "job", "        leftover = processes.kill_all(zygote.pid)\n",
                "        leftover = processes.kill_all(zygote.pid)\n"
                "        if os.path.exists('/scratch/boom'):\n"
                "            raise RecursionError('maximum recursion depth exceeded')\n")
    with _one_container(QUICK) as own:
        r = own.run(PRELUDE + "os.mkdir('/scratch/boom')\nwrong()\n")
        assert r.status == "dirty_container" and "RecursionError" in r.error, r
        nxt = own.run(PROBE)
        assert nxt.status == "ok" and nxt.stdout == PRISTINE, nxt


@docker
def test_a_clean_up_that_hangs_is_abandoned_at_its_deadline(monkeypatch):
    # The agent replies at the deadline, then exits: the thread it could not stop goes with it.
    line = "            done.append(wipe(roots, Budget(WIPE_ENTRIES, CLEAN_UP_S)))\n"
    _agent_with(monkeypatch, "clean_up", line,
                "            if os.path.exists('/scratch/hang'):\n"
                "                time.sleep(60)\n" + line)
    with _one_container(QUICK) as own:
        start = time.monotonic()
        r = own.run(PRELUDE + "os.mkdir('/scratch/hang')\nwrong()\n")
        assert r.status == "dirty_container" and "did not finish" in r.error, r
        assert time.monotonic() - start < clean_up.CLEAN_UP_S + 4
        assert own.run(PROBE).stdout == PRISTINE


def test_a_dirty_container_fails_the_code_job_whatever_the_judge_wrote():
    # A program that passed its tests and then left what the agent could not clean: the judge's
    # record cannot be trusted, so the job fails (and it is not an infrastructure error either).
    record = json.dumps({"loaded": True, "compiles": True, "runs": [{"passed": [0, 1]}]})
    for status, passed in (("ok", [0, 1]), ("dirty_container", [])):
        run = RunResult(status, 0, f"nonce {record}\n", "", False, 0.1)
        (report,) = read_reports(run, "nonce", 2)
        assert report.passed == passed and report.record_found is (status == "ok")
        assert not report.sandbox_error


def test_statuses_are_classified():
    assert "dirty_container" in PROGRAM_STATUSES and INFRA_STATUSES == ("sandbox_error",)
    assert not set(PROGRAM_STATUSES) & set(INFRA_STATUSES)


# -- the clean-up's walk, on this machine's file system (no Docker) -----------------------------

def _tree_is_gone(root: Path) -> bool:
    return os.listdir(root) == []


def _deep(root: Path, levels: int, name: str = "d") -> int:
    namespace: dict = {"os": os}
    exec(DEEP, namespace)  # the jobs' own helper, run on the host
    return namespace["deep"](root, levels, name)


def test_walk_removes_any_depth_and_path_length(tmp_path):
    os.close(_deep(tmp_path, 3000))  # three times the recursion limit
    (tmp_path / "wide").mkdir()
    fd = _deep(tmp_path / "wide", 40, "x" * 255)  # 10 KB paths
    os.close(fd)
    assert empty(str(tmp_path), Budget(100_000, 30.0)) and _tree_is_gone(tmp_path)


def test_walk_never_follows_links_and_leaves_their_targets(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    (root / "d").mkdir()
    os.symlink(outside, root / "out")
    os.symlink(outside, root / "d" / "out")
    os.symlink("..", root / "d" / "up")
    os.symlink("loop", root / "loop")
    os.mkfifo(root / "d" / "fifo")  # never opened: opening would block
    assert empty(str(root), Budget(1000, 10.0)) and _tree_is_gone(root)
    assert (outside / "keep").read_text() == "x"


def test_walk_takes_back_locked_directories(tmp_path):
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    for d in ("a", "a/b", "a/b/c"):
        (tmp_path / d / "f").write_text("x")
        os.chmod(tmp_path / d / "f", 0)
    for d, mode in (("a/b/c", 0), ("a/b", 0o100), ("a", 0o500)):
        os.chmod(tmp_path / d, mode)
    try:
        assert empty(str(tmp_path), Budget(1000, 10.0)) and _tree_is_gone(tmp_path)
    finally:
        for d in ("a", "a/b", "a/b/c"):
            if (tmp_path / d).exists():
                os.chmod(tmp_path / d, stat.S_IRWXU)


@pytest.mark.parametrize("entries, seconds", [(100, 10.0), (100_000, 0.0)])
def test_walk_stops_at_its_budget(tmp_path, monkeypatch, entries, seconds):
    monkeypatch.setattr(layout, "MQUEUE", str(tmp_path / "no-mqueue"))  # not the host's
    for i in range(600):
        (tmp_path / f"f{i}").touch()
    with pytest.raises(OverBudget):
        empty(str(tmp_path), Budget(entries, seconds))
    assert wipe([(str(tmp_path), 0o755)], Budget(entries, seconds)) == 2


def test_wipe_gives_the_root_back_its_mode_and_no_notes(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "MQUEUE", str(tmp_path / "no-mqueue"))
    (tmp_path / "f").touch()
    os.setxattr(tmp_path, "user.note", b"x")
    os.chmod(tmp_path, 0)
    assert wipe([(str(tmp_path), 0o755)], Budget(100, 5.0)) == 0
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o755 and os.listxattr(tmp_path) == []
    assert _tree_is_gone(tmp_path)


@docker
def test_a_graded_program_that_leaves_a_deep_tree_gets_its_ordinary_grade(sb):
    # The same through the code judge: the program (its own process) builds the tree as it
    # loads; the judge's record stands, the wrong case fails, nothing is an infra error.
    from sandbox.harness import run_tests

    program = PRELUDE.replace("def wrong():", "def _unused():") + (
        "os.close(deep('/scratch', 1500))\n"
        "os.close(deep('/dev/shm', 1500))\n"
        "def add(a, b):\n"
        "    return a - b\n")
    report = run_tests(sb, program, ["assert add(2, 0) == 2", "assert add(2, 3) == 5"])
    assert not report.sandbox_error and report.record_found and report.loaded, report
    assert report.passed == [0] and report.reasons == {0: "passed", 1: "failed"}, report
    nxt = sb.run(PROBE)
    assert nxt.status == "ok" and nxt.stdout == PRISTINE, nxt
