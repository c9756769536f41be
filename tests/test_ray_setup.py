"""``--ray-address`` and ``Sandbox(backend=...)``: bad input is one clear line, a local Ray
instance starts when no address is given."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from learner.config import Config, ConfigError

DEAD = "127.0.0.1:1"  # nothing listens on port 1


@pytest.mark.parametrize("address", ["nonsense", "10.0.0.1", "ray://host", "host:99999",
                                     "http://x:1/y"])
def test_a_malformed_address_is_one_line_before_anything_loads(address, capsys):
    from learner import run

    with pytest.raises(SystemExit) as exc:
        run.main(["--ray-address", address])
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert "is not a Ray address" in err[0] and len(err) == 2, err


def test_an_unreachable_cluster_is_one_line_before_the_model_loads(tmp_path, capsys):
    from learner import eval as learner_eval
    from learner import run

    # A model folder that exists but holds nothing loadable: the cluster is reported first,
    # so nothing was loaded (a path that does not exist is itself refused before the cluster).
    (tmp_path / "unloadable-model").mkdir()
    flags = ["--env", "grpo/MathExact-v0", "--env-kwargs", '{"pack": "arith"}',
             "--model", str(tmp_path / "unloadable-model"), "--ray-address", DEAD,
             "--output-dir", str(tmp_path / "run")]
    assert run.main(flags) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: cannot reach the Ray cluster at {DEAD}: nothing answers at {DEAD} "
                   "([Errno 111] Connection refused)"]
    assert learner_eval.main(flags) == 1
    assert capsys.readouterr().err.strip().splitlines() == err
    with pytest.raises(SystemExit) as exc:
        learner_eval.main([*flags[:-3], "--ray-address", "nonsense"])
    assert exc.value.code == 2


def test_the_address_needs_ray_installed(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else find_spec(name, *a))
    with pytest.raises(ConfigError, match=r"needs Ray, which is not installed: pip install"):
        Config(ray_address="auto").validate()
    Config().validate()  # without the flag Ray is not needed


def test_doctor_with_an_unreachable_cluster_says_so(capsys):
    from sandbox.__main__ import main

    assert main(["doctor", "--ray-address", DEAD]) == 1
    assert capsys.readouterr().out.startswith(f"FIX   cannot reach the Ray cluster at {DEAD}")


def test_sandbox_backend_arguments_are_checked():
    from sandbox import Sandbox

    with pytest.raises(ValueError, match="use 'local' or 'ray'"):
        Sandbox(backend="k8s")
    with pytest.raises(ValueError, match="needs backend='ray'"):
        Sandbox(ray_address="auto")


@pytest.mark.docker
@pytest.mark.slow
def test_without_an_address_a_local_ray_instance_runs_the_jobs():
    pytest.importorskip("ray")
    code = (
        "from sandbox import Sandbox\n"
        "from sandbox.ray_backend import RaySandbox\n"
        "sb = Sandbox(backend='ray', pool_size=1)\n"
        "assert isinstance(sb, RaySandbox) and isinstance(sb, Sandbox)\n"
        "print(len(sb.nodes()), sb.pool_size, sb.run('print(6 * 7)').stdout.strip())\n"
        "sb.close()\n"
        "print(sb.run('print(1)').status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1", "42", "sandbox_error"], done.stdout
