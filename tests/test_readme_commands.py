"""Every shell command of the README works as typed after set-up: each runs in a fresh shell
(no venv active, the venv's bin/ not on PATH) that first does what the README says to do once,
``. .venv/bin/activate``.

The commands are the lines of the ```bash blocks and the inline code spans that start with
``python``, ``make``, ``pip`` or ``openenv``. Most run exactly as written. Those that would run
for minutes, install packages, rewrite committed files or serve forever run in a form that
starts the same program and parses its flags; ``FORMS`` says which, and why. A command this
test does not know fails it (``test_every_command_has_a_form``), so a new README command gets
a form here.

Where the venv is: ``.venv`` in the clone when set-up made one, else the venv of the
interpreter running the tests (set-up's other choice: the active venv).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ACTIVATE = ". .venv/bin/activate"
EXAMPLE_PACK = "examples/task-pack/grpo_example_pack"


def readme_commands(text: str) -> list[str]:
    """The README's shell commands, in order, each once (comments and continuations joined)."""
    found: list[str] = []
    for token in MarkdownIt().parse(text):
        if token.type == "fence" and token.info.split()[:1] in (["bash"], ["sh"]):
            joined = re.sub(r"\\\n\s*", " ", token.content)
            for line in joined.splitlines():
                line = line.split("  #")[0].split(" # ")[0].strip()
                if line and not line.startswith("#"):
                    found.append(" ".join(line.split()))
        elif token.type == "inline":
            for child in token.children or []:
                code = " ".join(child.content.split())
                if child.type == "code_inline" and re.match(r"(python|make|pip|openenv) ", code + " "):
                    found.append(code)
    return list(dict.fromkeys(found))


def venv_activate() -> str:
    local = ROOT / ".venv" / "bin" / "activate"
    return str(local) if local.is_file() else str(Path(sys.prefix) / "bin" / "activate")


# Each README command -> what this test runs (with {tmp} a fresh folder, {tiny} the repo's tiny
# model saved with save_pretrained), and why when it is not the command as written.
TINY_RUN = ("--model {tiny} --steps 1 --prompts-per-step 2 --group-size 2 --max-new-tokens 4 "
            "--no-eval --no-progress --output-dir {tmp}/run --overwrite")
PIP_DRY_RUN = "pip install --dry-run --no-deps --no-index --no-build-isolation -q"
FORMS: dict[str, tuple[str, str | None]] = {
    ACTIVATE: (":", "done first in every shell"),
    "make demo": ("make -n demo", "installs, then trains for minutes: make's dry run, and the "
                                  "demo's own --help below"),
    "make test": ("make -n test", "the whole suite (what runs this test): make's dry run"),
    "python -m learner.demo": ("python -m learner.demo --help", "trains for minutes"),
    "python -m learner.eval": ("python -m learner.eval --help", "needs a model or a run"),
    "python -m envs": ("python -m envs --help", "names the command family, not a command"),
    "python -m envs list": ("python -m envs list", None),
    "python -m envs show grpo/MathExact-v0 --pack gsm8k --n 3":
        ("python -m envs show grpo/MathExact-v0 --pack gsm8k --n 3", None),
    "python -m envs validate PATH": (f"python -m envs validate {EXAMPLE_PACK}",
                                     "PATH is a placeholder: the example pack"),
    "python -m envs card grpo/MathExact-v0": ("python -m envs card --help",
                                              "four packs' cards: minutes"),
    "python -m envs card --all --fast --update-baseline":
        ("python -m envs card --help", "rewrites the README's table and the baseline"),
    "python -m envs serve grpo/CodeTests-v0 --pack humaneval":
        ("python -m envs serve --help", "serves until stopped"),
    "python benchmarks/reasoning_gym_cards.py": ("python benchmarks/reasoning_gym_cards.py "
                                                 "--help", "105 task cards: many minutes"),
    'pip install -e ".[openenv]"': (PIP_DRY_RUN + ' -e ".[openenv]"', "installs packages "
                                    "(make test has them): pip's dry run, offline"),
    'pip install -e ".[reasoning-gym]"': (PIP_DRY_RUN + ' -e ".[reasoning-gym]"',
                                          "installs packages: pip's dry run, offline"),
    "openenv validate": ("openenv validate --help", "validates a served env's folder "
                                                   "(docs/openenv.md runs it)"),
    "python -m learner.run --env grpo/CodeTests-v0": (
        "python -m learner.run --env grpo/CodeTests-v0 --help",
        "the design card: 15-20 minutes and the sandbox; its flags are parsed"),
    "python -m learner.plot runs/demo": ("python -m learner.plot {tmp}/run",
                                         "the tiny run's folder (the run above)"),
}
# Training commands run for real, on the tiny model for one step: the README's flags are kept,
# the ones after them (which win) make it seconds instead of minutes.
TRAINING = re.compile(r"^python -m learner\.run --env grpo/MathExact-v0 ")


def form(command: str) -> tuple[str, str | None]:
    if TRAINING.match(command):
        return f"{command} {TINY_RUN}", "the tiny model, one step (the flags after win)"
    return FORMS[command]


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_the_readme_has_its_commands_and_the_activate_line_first():
    assert ACTIVATE in COMMANDS and "make demo" in COMMANDS and "python -m envs list" in COMMANDS
    assert COMMANDS.index(ACTIVATE) < min(i for i, c in enumerate(COMMANDS)
                                          if c.startswith("python "))
    assert any(TRAINING.match(c) for c in COMMANDS)


def test_every_command_has_a_form():
    unknown = [c for c in COMMANDS if not TRAINING.match(c) and c not in FORMS]
    assert unknown == [], f"README commands with no form in FORMS: {unknown}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from learner.model import load_tokenizer, tiny_model

    path = tmp_path_factory.mktemp("tiny-model")
    tiny_model().save_pretrained(path)
    load_tokenizer().save_pretrained(path)
    return path


def fresh_shell_env() -> dict[str, str]:
    """A login-like environment: no venv active, its bin/ off PATH (so `python` is not it)."""
    bin_dir = str(Path(sys.prefix) / "bin")
    path = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if p and p != bin_dir and p != str(ROOT / ".venv" / "bin")]
    keep = ("HOME", "LANG", "PYTHONPATH", "GRPO_GYM_CACHE", "DOCKER_HOST", "TMPDIR")
    return {**{k: os.environ[k] for k in keep if k in os.environ},
            "PATH": os.pathsep.join(path)}


def test_every_readme_command_runs_in_a_fresh_shell_after_activating(tmp_path, tiny):
    env = fresh_shell_env()
    # The fresh shell's `python` is not the venv's: the README's commands need the activate line.
    plain = subprocess.run(["bash", "-c", "python -c 'import gymnasium'"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    activated = subprocess.run(["bash", "-c", f". {venv_activate()} && python -c "
                                "'import sys, gymnasium; print(sys.prefix)'"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert activated.returncode == 0, activated.stderr
    assert Path(activated.stdout.strip()).resolve() == Path(sys.prefix).resolve()
    if plain.returncode == 0:  # a system python with gymnasium: then it must not be the venv
        assert "venv" not in plain.stdout
    report = []
    for command in COMMANDS:  # in README order: the plot reads the run before it
        run_as, why = form(command)
        run_as = run_as.replace("{tmp}", str(tmp_path)).replace("{tiny}", str(tiny))
        done = subprocess.run(["bash", "-c", f". {venv_activate()} && {run_as}"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        report.append(f"rc {done.returncode}  {command}" + (f"  [ran: {run_as}; {why}]"
                                                            if why else ""))
        assert done.returncode == 0, (command, run_as, done.stdout[-2000:], done.stderr[-2000:])
    print("\n".join(report))
    assert (tmp_path / "run" / "plots" / "reward.png").is_file()
