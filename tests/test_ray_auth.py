"""A Ray head that requires token authentication (as ``ray start --head`` does once a local
``ray.init()`` wrote ``~/.ray/auth_token``): joining names the cause and the fix, for each way
the token can be missing, and joins once it is given. A real head, in a home folder of its own."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="pip install -e '.[ray]'")

from sandbox.ray_auth import refusal  # noqa: E402
from tests.polling import free_port  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "a" * 64
# The `ray` command of the Python running the tests: `make test` runs .venv/bin/python without
# putting .venv/bin on PATH.
RAY_CLI = str(Path(sysconfig.get_path("scripts")) / "ray")
UP_WITHIN_S = 90.0


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return {**env, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", **extra}


def home_with(root: Path, name: str, token: str | None) -> Path:
    home = root / name
    (home / ".ray").mkdir(parents=True, exist_ok=True)
    if token is not None:
        (home / ".ray" / "auth_token").write_text(token)
    return home


@pytest.fixture(scope="module")
def head():
    """``(address, folder)`` of a one-CPU head node that requires ``TOKEN``."""
    # A short folder of its own: Ray's sockets live in it (their paths are length-limited), and
    # its address file stays out of the shared /tmp/ray, so `auto` elsewhere never finds it.
    root = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    home = home_with(root, "head", TOKEN)
    port = free_port()
    proc = subprocess.Popen(
        [RAY_CLI, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
         "--include-dashboard=false", f"--temp-dir={root / 'ray'}"],
        env=env_for(home, RAY_AUTH_MODE="token"), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + UP_WITHIN_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    try:
        yield address, root
    finally:
        proc.send_signal(signal.SIGTERM)  # --block: ray start stops what it started
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)
        with contextlib.suppress(ProcessLookupError):  # anything of its session still there
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)


def join(address: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    code = ("import sys, ray\n"
            "from sandbox.ray_cluster import RayUnavailable, connect\n"
            "try:\n"
            f"    connect({address!r})\n"
            "except RayUnavailable as exc:\n"
            "    print(exc); sys.exit(1)\n"
            "print('joined', int(ray.cluster_resources()['CPU'])); ray.shutdown()\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=180)


def test_a_token_on_this_machine_without_the_mode_names_ray_auth_mode(head):
    address, root = head
    out = join(address, env_for(home_with(root, "mine", TOKEN)))
    assert out.returncode == 1, out
    assert out.stdout.strip() == refusal(address, token_mode=False, has_token=True)
    assert "set RAY_AUTH_MODE=token" in out.stdout and "--ray-address auto" in out.stdout
    assert "InvalidAuthToken" not in out.stderr  # Ray's C++ log of the refusal is kept quiet


def test_no_token_or_a_wrong_one_says_to_copy_the_heads(head):
    address, root = head
    none = join(address, env_for(home_with(root, "none", None), RAY_AUTH_MODE="token"))
    # With the mode on and no token at all, Ray's client would abort the process.
    assert none.returncode == 1 and "RAY_AUTH_MODE=token is set, but this machine has no Ray " \
        "token" in none.stdout, none
    plain = join(address, env_for(home_with(root, "none", None)))
    assert plain.stdout.strip() == refusal(address, token_mode=False, has_token=False), plain
    wrong = join(address, env_for(home_with(root, "wrong", "b" * 64), RAY_AUTH_MODE="token"))
    assert wrong.stdout.strip() == refusal(address, token_mode=True, has_token=True), wrong
    assert "copy its ~/.ray/auth_token" in wrong.stdout


def test_with_the_mode_and_the_token_it_joins(head):
    address, root = head
    out = join(address, env_for(root / "head", RAY_AUTH_MODE="token"))
    assert (out.returncode, out.stdout.strip()) == (0, "joined 1"), out


def test_the_doctor_diagnoses_the_token(head):
    address, root = head
    out = subprocess.run([sys.executable, "-m", "sandbox", "doctor", "--ray-address", address],
                         cwd=ROOT, env=env_for(home_with(root, "mine", TOKEN)), text=True, capture_output=True,
                         timeout=180)
    assert out.returncode == 1, out
    assert out.stdout.splitlines()[0] == "FIX   " + refusal(address, False, True), out
