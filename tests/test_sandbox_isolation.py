"""Hostile programs against the real Docker engine: each isolation control, one test at least."""

from __future__ import annotations

import json
import os

import pytest

from sandbox import Limits, Sandbox

pytestmark = pytest.mark.docker

QUICK = Limits(wall_s=2.0, cpu_s=2.0)


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=2) as sandbox:
        yield sandbox


def run_json(sb: Sandbox, code: str, **kw):
    r = sb.run(code, **kw)
    assert r.status == "ok", r
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_healthy(sb: Sandbox) -> None:
    """After a hostile run the pool still works and the next run is pristine."""
    for _ in range(sb.pool_size + 1):
        out = run_json(sb, PROBE)
        assert out["scratch"] == [] and out["shm"] == [], out
        assert out["others"] == [], out


# Lists what a run can see of earlier runs: files and live foreign processes.
PROBE = r"""
import json, os
others = []
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) in (1, os.getpid()):
        continue
    try:
        if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            continue  # a killed job's zombie, not reaped yet: dead, holding no memory or files
        cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
    except FileNotFoundError:
        continue
    except OSError:
        cmd = [b"unreadable"]
    if b"-c" in cmd and any(b"The zygote" in c or b"recv_fds" in c for c in cmd):
        continue  # the pristine zygote that forks jobs
    others.append([p, [c.decode(errors="replace")[:40] for c in cmd]])
print(json.dumps({"scratch": sorted(set(os.listdir("/scratch")) - {"main.py"}), "shm": os.listdir("/dev/shm"),
                  "others": others}))
"""


def test_fork_bomb_is_contained(sb):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = sb.run(code, limits=QUICK)
    assert r.status in ("timeout", "runtime_error"), r
    assert_healthy(sb)


def test_pids_limit_caps_processes(sb):
    code = r"""
import subprocess, sys
procs = []
try:
    for _ in range(500):
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
except OSError as exc:
    print("limited", len(procs), type(exc).__name__)
"""
    r = sb.run(code, limits=Limits(wall_s=20, cpu_s=20))
    assert r.status in ("ok", "timeout"), r
    assert "limited" in r.stdout, r
    assert int(r.stdout.split()[1]) < sb.limits.pids
    assert_healthy(sb)


def test_memory_bomb_hits_memory_limit(sb):
    code = "x = []\nwhile True:\n    x.append(bytearray(10 * 1024 * 1024))\n"
    r = sb.run(code, limits=Limits(memory_mb=128, wall_s=20, cpu_s=20))
    assert r.status == "memory_limit", r


def test_swap_is_disabled_and_memory_limited(sb):
    code = (
        "import json\n"
        "def read(p):\n"
        "    try:\n        return open(p).read().strip()\n    except OSError:\n        return None\n"
        "print(json.dumps([read('/sys/fs/cgroup/memory/memory.limit_in_bytes'),"
        " read('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes'),"
        " read('/sys/fs/cgroup/memory.max'), read('/sys/fs/cgroup/memory.swap.max')]))\n"
    )
    limit, memsw, v2_max, v2_swap = run_json(sb, code)
    want = str(sb.limits.memory_mb * 1024 * 1024)
    assert want in (limit, v2_max)
    # v1: memory+swap equals memory (no swap); v2: swap.max is 0. memsw may be absent (no
    # swap accounting), in which case the host has no swap for the container to use either.
    assert memsw in (None, want) and v2_swap in (None, "0")


def test_cpu_spin_times_out(sb):
    r = sb.run("while True:\n    pass\n", limits=Limits(wall_s=30, cpu_s=1))
    assert r.status == "timeout", r


def test_cpu_quota_is_set(sb):
    code = r"""
import json
def read(p):
    try:
        return open(p).read().split()
    except OSError:
        return None
print(json.dumps([read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                  read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"), read("/sys/fs/cgroup/cpu.max")]))
"""
    quota, period, v2 = run_json(sb, code)
    if v2:
        assert int(v2[0]) / int(v2[1]) == sb.limits.cpus
    else:
        assert int(quota[0]) / int(period[0]) == sb.limits.cpus


def test_sleep_past_wall_limit_times_out(sb):
    r = sb.run("import time\nprint('start', flush=True)\ntime.sleep(100)\n",
               limits=Limits(wall_s=1, cpu_s=1))
    assert r.status == "timeout", r
    assert r.stdout == "start\n"
    assert_healthy(sb)


def test_sigterm_ignored_is_killed(sb):
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "while True:\n    time.sleep(0.05)\n")
    r = sb.run(code, limits=Limits(wall_s=1, cpu_s=1))
    assert r.status == "timeout", r
    assert_healthy(sb)


def test_output_flood_is_capped(sb):
    r = sb.run("import sys\nwhile True:\n    sys.stdout.write('x' * 4096)\n",
               limits=Limits(output_bytes=10_000, wall_s=10, cpu_s=10))
    assert r.status == "output_limit"
    assert r.truncated
    assert len(r.stdout) <= 10_000
    r = sb.run("import sys\nsys.stderr.write('e' * 50_000)\n",
               limits=Limits(output_bytes=10_000, wall_s=10, cpu_s=10))
    assert r.status == "output_limit" and r.truncated and len(r.stderr) <= 10_000


def test_huge_ignored_stdin_does_not_deadlock(sb):
    r = sb.run("print('done')\n", stdin="x" * (8 * 1024 * 1024), limits=QUICK)
    assert r.status == "ok" and r.stdout == "done\n"
    # A program that never reads and never exits only times out.
    r = sb.run("import time\ntime.sleep(60)\n", stdin="y" * (4 * 1024 * 1024),
               limits=Limits(wall_s=1, cpu_s=1))
    assert r.status == "timeout", r


def test_stdin_is_fed(sb):
    data = "".join(f"{i}\n" for i in range(100_000))
    r = sb.run("import sys\nprint(sum(int(x) for x in sys.stdin))\n", stdin=data)
    assert r.status == "ok" and r.stdout.strip() == str(sum(range(100_000)))


def test_disk_fill_one_big_file(sb):
    code = "with open('big', 'wb') as f:\n    while True:\n        f.write(b'0' * (1 << 20))\n"
    r = sb.run(code, limits=QUICK)
    assert r.status == "runtime_error", r
    assert_healthy(sb)
    out = run_json(sb, "import json, os\nopen('f', 'w').write('x' * 1000)\n"
                       "print(json.dumps(os.path.getsize('f')))\n")
    assert out == 1000


def test_disk_fill_many_small_files(sb):
    code = "i = 0\nwhile True:\n    open(f'f{i}', 'w').close()\n    i += 1\n"
    r = sb.run(code, limits=Limits(wall_s=20, cpu_s=20))
    assert r.status == "runtime_error", r
    assert "No space left" in r.stderr or "OSError" in r.stderr
    assert_healthy(sb)


NETWORK = r"""
import json, socket
def attempt(fn):
    try:
        fn()
        return "connected"
    except OSError as exc:
        return type(exc).__name__
out = {
    "hostname": attempt(lambda: socket.create_connection(("example.com", 80), timeout=2)),
    "raw_ip": attempt(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2)),
    "udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
        b"x", ("8.8.8.8", 53))),
    "dns": attempt(lambda: socket.getaddrinfo("pypi.org", 443)),
    "ifaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
}
print(json.dumps(out))
"""


def test_no_network(sb):
    out = run_json(sb, NETWORK, limits=Limits(wall_s=20, cpu_s=20))
    assert out["hostname"] != "connected"
    assert out["raw_ip"] != "connected"
    assert out["udp"] != "connected"
    assert out["dns"] != "connected"
    assert out["ifaces"] == ["lo"]


def test_no_host_secrets_or_environment(sb, monkeypatch):
    monkeypatch.setenv("GRPO_TEST_SECRET", "hunter2")
    code = r"""
import json, os
def readable(p):
    try:
        open(p, "rb").read(1)
        return True
    except OSError:
        return False
print(json.dumps({
    "env": dict(os.environ),
    "shadow": readable("/etc/shadow"),
    "agent_environ": readable("/proc/1/environ"),
    "agent_fd": readable("/proc/1/fd/1"),
    "agent_mem": readable("/proc/1/mem"),
    "root_home": readable("/root/.bash_history") or os.access("/root", os.R_OK),
    "docker_sock": any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/docker.sock")),
    "mounts": open("/proc/mounts").read(),
}))
"""
    out = run_json(sb, code)
    assert "GRPO_TEST_SECRET" not in out["env"]
    assert "hunter2" not in json.dumps(out)
    assert set(out["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE",
                               "PYTHONUNBUFFERED", "LC_CTYPE"}
    assert not out["shadow"] and not out["agent_environ"] and not out["agent_fd"]
    assert not out["agent_mem"] and not out["root_home"] and not out["docker_sock"]
    host_paths = {os.getcwd(), os.path.expanduser("~"), "/work", "/var/lib/docker/volumes"}
    mounted = {line.split()[1] for line in out["mounts"].splitlines()}
    assert not mounted & host_paths
    assert "docker.sock" not in out["mounts"]


def test_system_files_are_read_only(sb):
    code = r"""
import json, os, tempfile
def writable(p):
    try:
        with open(p, "a"):
            pass
        return True
    except OSError:
        return False
t = tempfile.NamedTemporaryFile(delete=False)
print(json.dumps({
    "passwd": writable("/etc/passwd"),
    "stdlib": writable("/usr/lib/python3.11/os.py"),
    "new_root_file": writable("/evil"),
    "tmp": writable("/tmp/evil"),
    "tempfile_dir": os.path.dirname(t.name),
}))
"""
    out = run_json(sb, code)
    assert out == {"passwd": False, "stdlib": False, "new_root_file": False, "tmp": False,
                   "tempfile_dir": "/scratch"}


def test_non_root_no_capabilities_no_setuid(sb):
    code = r"""
import json, os, stat
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
setuid = []
for d in ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/lib"):
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.lstat(p).st_mode & (stat.S_ISUID | stat.S_ISGID):
                    setuid.append(p)
            except OSError:
                pass
try:
    os.setuid(0)
    became_root = True
except PermissionError:
    became_root = False
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "nnp": status["NoNewPrivs"].strip(),
                  "capeff": status["CapEff"].strip(), "capbnd": status["CapBnd"].strip(),
                  "setuid_files": setuid, "became_root": became_root}))
"""
    out = run_json(sb, code)
    assert out["uid"] != 0 and out["euid"] != 0
    assert out["nnp"] == "1"
    assert int(out["capeff"], 16) == 0 and int(out["capbnd"], 16) == 0
    assert out["setuid_files"] == []
    assert not out["became_root"]


def test_no_tty(sb):
    code = ("import json, os\ntry:\n    open('/dev/tty')\n    tty = True\nexcept OSError:\n"
            "    tty = False\nprint(json.dumps([os.isatty(0), os.isatty(1), os.isatty(2), tty]))\n")
    assert run_json(sb, code) == [False, False, False, False]


def test_segfault_is_a_runtime_error(sb):
    r = sb.run("import ctypes\nctypes.string_at(0)\n", limits=QUICK)
    assert r.status == "runtime_error", r
    assert r.exit_code == -11
    assert_healthy(sb)


def test_daemon_left_behind_is_killed(sb):
    code = r"""
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c",
                 "import time\nwhile True:\n    open('/scratch/daemon.txt', 'a').write('x')\n"
                 "    open('/dev/shm/daemon', 'a').write('x')\n    time.sleep(0.01)\n",
                 "DAEMON-MARKER"])
    os._exit(0)
print("parent done")
"""
    r = sb.run(code, limits=QUICK)
    assert r.status == "ok" and r.stdout == "parent done\n"
    for _ in range(2 * sb.pool_size):
        out = run_json(sb, PROBE)
        assert "DAEMON-MARKER" not in json.dumps(out["others"])
        assert out == {"scratch": [], "shm": [], "others": []}, out


def test_killing_every_process_does_not_break_the_pool(sb):
    code = ("import os, signal\nfor sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):\n"
            "    os.kill(-1, sig)\n    try:\n        os.kill(1, sig)\n    except OSError:\n"
            "        pass\nprint('still here')\n")
    r = sb.run(code, limits=QUICK)
    assert r.status == "ok" and r.stdout == "still here\n", r
    assert_healthy(sb)


KILL_ZYGOTE = r"""
import os, signal
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) not in (1, os.getpid()):
        try:
            os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
"""


def test_a_job_that_cannot_start_is_retried_on_another_container(sb):
    # Simulate the race where a job kills the container's zygote just as it exits, before the
    # agent can mark the container dirty: put such a container back into the pool as reusable.
    from sandbox.worker import JobInput, JobNotStarted

    worker = sb._pool.acquire()
    worker.run(JobInput.of(KILL_ZYGOTE, "", None, QUICK), QUICK)
    with pytest.raises(JobNotStarted):
        worker.run(JobInput.of("print(1)", "", None, QUICK), QUICK)
    sb._pool.release(worker, True)
    for _ in range(sb.pool_size + 1):
        r = sb.run("print('fine')", limits=QUICK)
        assert r.status == "ok" and r.stdout == "fine\n", r

def test_each_run_is_pristine(sb):
    code = r"""
import os, sys
os.makedirs("/scratch/d", exist_ok=True)
open("/scratch/d/secret", "w").write("left")
open("/dev/shm/secret", "w").write("left")
os.chmod("/scratch/d", 0)
sys.modules["json"] = None
print("planted")
"""
    assert sb.run(code).stdout == "planted\n"
    assert_healthy(sb)


def test_sysv_ipc_does_not_leak(sb):
    # A SysV message queue outlives its creator; the container is recycled after such a run.
    code = ("import ctypes\nlibc = ctypes.CDLL(None)\nq = libc.msgget(4242, 0o1666)\n"
            "print(q >= 0)\n")
    r = sb.run(code)
    assert r.status == "ok", r
    for _ in range(sb.pool_size + 1):
        out = sb.run("print(open('/proc/sysvipc/msg').read().count('\\n'))\n")
        assert out.stdout.strip() == "1"  # header only


def test_ptrace_of_agent_is_denied(sb):
    code = ("import ctypes, json\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(json.dumps(libc.ptrace(16, 1, 0, 0)))\n")  # PTRACE_ATTACH to the agent
    assert run_json(sb, code) == -1
