"""``python -m learner.demo --help`` shows the settings the demo runs with, not learner.run's
defaults (which the demo replaces), and answers before anything loads."""

from __future__ import annotations

import shlex
import subprocess
import sys

from learner import demo
from learner.config import build_parser


def test_help_lists_the_demo_settings_not_the_run_defaults(capsys) -> None:
    assert demo.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m learner.demo")
    assert "--steps 16" in out and "--max-new-tokens 32" in out and "--beta 0" in out
    assert "(default:" not in out  # learner.run's defaults (100 steps, ...) are not the demo's
    # The settings shown are exactly the flags the demo passes, and they parse as shown.
    shown = [line.strip() for line in out.splitlines() if line.startswith("  --")]
    argv = [word for line in shown for word in shlex.split(line)]
    assert argv == [*demo.DEMO_FLAGS, "--overwrite"]
    parsed = vars(build_parser().parse_args(argv))
    assert parsed["steps"] == 16 and parsed["env_kwargs"]["require_boxed"] is True


def test_help_answers_before_torch_loads() -> None:
    code = ("import sys; from learner import demo; demo.main(['--help']); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().endswith("False")
