"""Warm pools per set of container limits, and job input of any size, on the real engine."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox
from tests.polling import wait_until

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]

ALLOCATE = "x = b'x' * ({mb} << 20)\nprint('held', len(x) >> 20)\n"
CGROUP_MEMORY = """
import os
for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if os.path.exists(path):
        print(open(path).read())
        break
"""


def pooled(sb: Sandbox) -> int:
    return sum(s["ready"] + s["busy"] + s["starting"] for s in sb.pool_state())


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=1, max_containers=3) as sandbox:
        yield sandbox


def test_memory_limit_is_enforced_per_set_of_limits(sb):
    small, large = Limits(memory_mb=128), Limits(memory_mb=256)
    # 192 MB fits the 256 MB set and not the 128 MB one; 64 MB fits both.
    assert sb.run(ALLOCATE.format(mb=192), limits=large).status == "ok"
    assert sb.run(ALLOCATE.format(mb=192), limits=small).status == "memory_limit"
    assert sb.run(ALLOCATE.format(mb=64), limits=small).status == "ok"
    assert sb.run(ALLOCATE.format(mb=320), limits=large).status == "memory_limit"
    r = sb.run(CGROUP_MEMORY, limits=small)
    assert r.status == "ok" and int(r.stdout) == 128 << 20, r
    sets = {s["memory_mb"] for s in sb.pool_state()}
    assert {128, 256, 512} <= sets


def test_a_set_of_limits_reuses_its_warm_container(sb):
    limits = Limits(pids=16)
    first = sb.run("print(open('/sys/fs/cgroup/pids/pids.max').read().strip())", limits=limits)
    assert first.status == "ok" and first.stdout.strip() == "16", first
    ids = set(sb.containers())
    for _ in range(5):
        assert sb.run("pass", limits=limits).status == "ok"
    assert set(sb.containers()) == ids  # no container started or removed: the same ones ran


def test_containers_are_bounded_in_total(sb):
    for mb in (96, 128, 160, 192, 224, 96):
        r = sb.run("print('hi')", limits=Limits(memory_mb=mb))
        assert r.status == "ok", r
        assert pooled(sb) <= sb.max_containers
    # Containers taken for room are removed in the background.
    assert wait_until(lambda: len(sb.containers()) <= sb.max_containers)


def test_a_set_left_idle_is_closed_but_the_default_stays():
    with Sandbox(pool_size=1, idle_s=0.5) as sandbox:
        assert sandbox.run("pass", limits=Limits(memory_mb=200)).status == "ok"
        assert wait_until(lambda: [s["memory_mb"] for s in sandbox.pool_state()] == [512])
        assert wait_until(lambda: len(sandbox.containers()) == 1)
        assert sandbox.run("pass", limits=Limits(memory_mb=200)).status == "ok"


@pytest.mark.parametrize("mb", [50, 200])
def test_large_ignored_stdin_is_ok_at_256_mb(sb, mb):
    r = sb.run("print('done')", stdin=b"x" * (mb << 20), limits=Limits(memory_mb=256))
    assert r.status == "ok" and r.stdout == "done\n", r


def test_large_stdin_reaches_the_program_intact(sb):
    data = os.urandom(50 << 20)
    code = "import hashlib, sys\nprint(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n"
    r = sb.run(code, stdin=data, limits=Limits(memory_mb=256))
    assert r.status == "ok" and r.stdout.strip() == hashlib.sha256(data).hexdigest(), r
    # A program that reads half and stops: the rest is drained, the next job is in step.
    r = sb.run("import sys\nsys.stdin.buffer.read(1000)\nprint('half')", stdin=data,
               limits=Limits(memory_mb=256))
    assert r.status == "ok" and r.stdout == "half\n", r
    assert sb.run("print(input())", stdin="next\n", limits=Limits(memory_mb=256)).stdout == "next\n"


def test_files_are_streamed_and_oversize_files_refused_up_front(sb):
    blob = os.urandom(40 << 20)
    code = "import hashlib\nprint(hashlib.sha256(open('d/blob', 'rb').read()).hexdigest())\n"
    r = sb.run(code, files={"d/blob": blob}, limits=Limits(memory_mb=256))
    assert r.status == "ok" and r.stdout.strip() == hashlib.sha256(blob).hexdigest(), r
    with pytest.raises(ValueError, match="disk_mb=64"):
        sb.run("pass", files={"big": b"x" * (65 << 20)}, limits=Limits(memory_mb=256))
    with pytest.raises(ValueError, match="memory_mb=64"):
        sb.run("pass", files={"big": b"x" * (40 << 20)}, limits=Limits(memory_mb=64))


def test_doctor_reports_each_pool_per_set_of_limits(sb):
    assert sb.run("pass").status == "ok"
    assert sb.run("pass", limits=Limits(memory_mb=256)).status == "ok"
    p = subprocess.run([sys.executable, "-m", "sandbox", "doctor"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    mine = [line for line in p.stdout.splitlines() if f"pool of process {os.getpid()} " in line]
    assert any("memory_mb=256," in line and "running containers" in line for line in mine), p.stdout
    assert any("memory_mb=512," in line for line in mine), p.stdout
