"""The Sandbox API, the pool and container lifetime, against the real Docker engine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest

from sandbox import Limits, Sandbox, SandboxUnavailable
from sandbox.image import default_tag, recipe_hash
from sandbox.worker import LABEL, OWNER_LABEL
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def client():
    return docker.from_env()


def owned_by(client, owner: str) -> list[str]:
    return [c["Id"] for c in client.api.containers(
        all=True, filters={"label": f"{OWNER_LABEL}={owner}"})]


# -- no engine (no docker needed) --------------------------------------------------------------
def test_no_engine_fails_fast_with_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    with pytest.raises(SandboxUnavailable) as err:
        Sandbox()
    message = str(err.value)
    assert "no-such-docker.sock" in message and "doctor" in message


def test_doctor_explains_a_missing_engine(tmp_path):
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/gone.sock")
    p = subprocess.run([sys.executable, "-m", "sandbox", "doctor"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "unreachable" in p.stdout and "DOCKER_HOST" in p.stdout


def test_image_tag_is_content_addressed():
    assert default_tag() == f"grpo-sandbox:{recipe_hash()}"
    assert len(recipe_hash()) == 12


def test_limits_validate():
    with pytest.raises(ValueError):
        Limits(wall_s=0)
    with pytest.raises(ValueError):
        Limits(pids=2)


# -- the API ------------------------------------------------------------------------------------

@pytest.mark.docker
def test_doctor_is_happy(sb):
    p = subprocess.run([sys.executable, "-m", "sandbox", "doctor"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout
    assert sb.image in p.stdout


@pytest.mark.docker
def test_run_basics(sb):
    assert sb.image == default_tag() or sb.image == os.environ.get("GRPO_SANDBOX_IMAGE")
    r = sb.run("import sys\nprint(input()[::-1])\nprint('err', file=sys.stderr)\n",
               stdin="olleh\n")
    assert (r.status, r.exit_code, r.stdout, r.stderr, r.truncated) == (
        "ok", 0, "hello\n", "err\n", False)
    assert r.wall_s > 0
    r = sb.run("import sys\nsys.exit(3)\n")
    assert (r.status, r.exit_code) == ("runtime_error", 3)
    r = sb.run("raise ValueError('boom')\n")
    assert r.status == "runtime_error" and r.exit_code == 1
    assert 'File "/scratch/main.py", line 1' in r.stderr and "ValueError: boom" in r.stderr
    r = sb.run("def f(:\n")
    assert r.status == "runtime_error" and "SyntaxError" in r.stderr


@pytest.mark.docker
def test_files_and_imports(sb):
    files = {"helper.py": "VALUE = 41\n", "data/blob.bin": b"\x00\x01\xff"}
    code = ("import helper\nprint(helper.VALUE + 1)\n"
            "print(list(open('data/blob.bin', 'rb').read()))\nprint(__name__)\n")
    r = sb.run(code, files=files)
    assert r.status == "ok", r
    assert r.stdout == "42\n[0, 1, 255]\n__main__\n"
    with pytest.raises(ValueError):
        sb.run("pass", files={"../escape": "x"})


@pytest.mark.docker
def test_a_job_sees_a_plain_interpreter_not_the_agents_modules(sb):
    # Jobs are forked from the zygote, itself a bundle of sandbox.inside modules: a job finds
    # none of them, and its own package of that name is the one it imports.
    code = ("import builtins, sys\n"
            "print([n for n in sys.modules if n.startswith(('sandbox', '__future__'))])\n"
            "import sandbox\nprint(sandbox.MINE, __builtins__ is builtins)\n")
    r = sb.run(code, files={"sandbox/__init__.py": "MINE = 'mine'\n"})
    assert r.status == "ok" and r.stdout == "[]\nmine True\n", r


@pytest.mark.docker
def test_main_module_semantics(sb):
    code = textwrap.dedent("""
        import atexit, pickle, sys, threading
        class Point:
            pass
        assert pickle.loads(pickle.dumps(Point())).__class__.__name__ == "Point"
        atexit.register(lambda: print("atexit ran"))
        t = threading.Thread(target=lambda: print("thread ran"))
        t.start()
        if __name__ == "__main__":
            print(sys.argv)
    """)
    r = sb.run(code)
    assert r.status == "ok", r
    assert r.stdout.splitlines() == ["thread ran", "['/scratch/main.py']", "atexit ran"]


@pytest.mark.docker
def test_unicode_and_binary_output(sb):
    r = sb.run("import sys\nprint('héllo ✓')\nsys.stdout.flush()\n"
               "sys.stdout.buffer.write(b'\\xff\\n')\n")
    assert r.status == "ok"
    assert r.stdout.startswith("héllo ✓\n")


@pytest.mark.docker
def test_thread_safe_concurrent_runs(sb):
    def job(i: int):
        return i, sb.run(f"print({i} * {i})")

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(job, range(24)))
    for i, r in results:
        assert r.status == "ok" and r.stdout == f"{i * i}\n", r


@pytest.mark.docker
def test_async_variant(sb):
    async def main():
        return await asyncio.gather(*(sb.arun(f"print({i})") for i in range(6)))

    results = asyncio.run(main())
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]


@pytest.mark.docker
def test_other_container_limits_get_their_own_containers(sb):
    r = sb.run("print(open('/sys/fs/cgroup/pids/pids.max').read().strip())",
               limits=Limits(pids=16))
    assert r.status == "ok" and r.stdout.strip() == "16", r


@pytest.mark.docker
def test_container_dying_mid_run_is_a_sandbox_error(sb, client):
    before = set(sb.containers())
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=sb.run(
        "import time\nprint('up', flush=True)\ntime.sleep(60)\n",
        limits=Limits(wall_s=60, cpu_s=60))))
    t.start()
    # The container running the job has more processes than its agent and zygote.
    victim = None

    def find_victim():
        nonlocal victim
        for cid in before:
            try:
                top = client.api.top(cid)
            except docker.errors.APIError:
                continue
            if len(top.get("Processes") or []) > 2:
                victim = cid
                return True
        return False

    assert wait_until(find_victim, 30)
    client.api.kill(victim)
    t.join(60)
    r = box["r"]
    assert r.status == "sandbox_error", r
    assert r.error
    # The pool replaces the dead container and keeps working.
    for _ in range(3):
        assert sb.run("print('ok')").stdout == "ok\n"


@pytest.mark.docker
def test_close_removes_every_container(client):
    sandbox = Sandbox(pool_size=2)
    sandbox.warm()
    assert sandbox.run("print(1)").stdout == "1\n"
    assert len(sandbox.containers()) >= 2
    sandbox.close()
    assert wait_until(lambda: sandbox.containers() == [])
    assert sandbox.run("print(1)").status == "sandbox_error"


# The child takes SIGINT as an interactive Python does (KeyboardInterrupt): an ignored SIGINT
# is inherited through exec, and some library earlier in a test session may have ignored it.
CHILD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from sandbox import Sandbox
sb = Sandbox(pool_size=2)
sb.warm()
assert sb.run("print(1)").stdout == "1\\n"
print(sb.owner, flush=True)
time.sleep(600)
"""


def _start_child() -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE,
                         text=True)
    owner = p.stdout.readline().strip()
    assert owner, "child did not start a sandbox"
    return p, owner


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_container(client, sig):
    p, owner = _start_child()
    assert owned_by(client, owner)
    p.send_signal(sig)
    p.wait(60)
    assert wait_until(lambda: owned_by(client, owner) == [])


@pytest.mark.docker
def test_host_crash_leaves_no_container(client):
    p, owner = _start_child()
    ids = owned_by(client, owner)
    assert ids
    p.kill()  # SIGKILL: no atexit, no signal handler
    p.wait(60)
    # The next Sandbox start removes stale containers of dead owners (if the agents have not
    # already exited on their own when their attach sockets closed).
    with Sandbox(pool_size=1) as other:
        assert other.run("print(2)").stdout == "2\n"
        assert wait_until(lambda: owned_by(client, owner) == [])


@pytest.mark.docker
def test_stale_containers_of_dead_owners_are_removed(client, sb):
    # A labelled container whose owner process is gone, that does not exit by itself.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    owner = f"{socket.gethostname()}:{dead}:1"
    cid = client.api.create_container(
        sb.image, command=["python3", "-c", "import time; time.sleep(600)"],
        labels={LABEL: "1", OWNER_LABEL: owner},
        host_config=client.api.create_host_config(network_mode="none"))["Id"]
    client.api.start(cid)
    try:
        with Sandbox(pool_size=1):
            assert owned_by(client, owner) == []
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(cid, force=True)
