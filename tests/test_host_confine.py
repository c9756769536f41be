"""The confined scorer worker (``sandbox.host_confine``): third-party scorers that ``eval`` the
model's answer (reasoning-gym's spiral_matrix, binary_matrix, string_insertion, n_queens; sympy's
``parse_expr`` in polynomial_multiplication, the integrations, countdown, puzzle24) ran that text
on the host: ``<answer>__import__('os').system('touch F')</answer>`` created F. Confined, the
worker starts no process, opens no socket, changes no file, and a memory bomb fails inside it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from sandbox import host_confine

pytestmark = pytest.mark.skipif(not host_confine.supported(), reason="x86_64 filter only")


def test_a_confined_process_reads_and_computes_but_changes_nothing(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("kept")
    script = textwrap.dedent(f"""
        import os, socket, subprocess, threading
        out = os.dup(1)
        import sympy
        from sandbox.host_confine import confine
        confine(memory_bytes=4 << 30)
        def attempt(name, f):
            try:
                f()
                os.write(out, f"{{name}}|allowed\\n".encode())
            except BaseException as exc:
                os.write(out, f"{{name}}|refused|{{type(exc).__name__}}\\n".encode())
        attempt("system", lambda: os.system("touch {tmp_path}/sys") == 0 or 1 / 0)
        attempt("subprocess", lambda: subprocess.run(["true"]))
        attempt("fork", os.fork)
        attempt("write", lambda: open("{tmp_path}/new", "w"))
        attempt("append", lambda: open("{victim}", "a"))
        attempt("truncate", lambda: os.truncate("{victim}", 0))
        attempt("unlink", lambda: os.unlink("{victim}"))
        attempt("rename", lambda: os.rename("{victim}", "{tmp_path}/moved"))
        attempt("socket", socket.socket)
        attempt("signal parent", lambda: os.kill(os.getppid(), 0))
        attempt("bomb", lambda: "a" * 10**10)
        attempt("read", lambda: open("{victim}").read())
        t = threading.Thread(target=lambda: None)
        attempt("thread", lambda: (t.start(), t.join()))
        attempt("sympy", lambda: sympy.parse_expr("x**2 + 2*x + 1").factor())
        attempt("sympy hack", lambda: sympy.parse_expr(
            "__import__('os').system('touch {tmp_path}/sympy')"))  # runs; the touch cannot
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[1])
    verdicts = dict(line.split("|", 2)[:2] for line in done.stdout.splitlines())
    refused = {"system", "subprocess", "fork", "write", "append", "truncate", "unlink",
               "rename", "socket", "signal parent", "bomb"}
    assert {k for k, v in verdicts.items() if v == "refused"} == refused, done.stdout + done.stderr
    assert {k for k, v in verdicts.items() if v == "allowed"} == {"read", "thread", "sympy",
                                                                 "sympy hack"}
    assert victim.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


@pytest.mark.parametrize("task", ["spiral_matrix", "binary_matrix", "string_insertion",
                                  "n_queens", "polynomial_multiplication"])
def test_an_answer_that_evals_code_earns_nothing_and_runs_nothing(task, tmp_path):
    pytest.importorskip("reasoning_gym")
    env = gym.make("grpo/ReasoningGym-v0", task=task).unwrapped
    _, info = env.reset(seed=0)
    mark = tmp_path / f"pwned-{task}"
    for payload in (f"__import__('os').system('touch {mark}')",
                    f"[__import__('os').system('touch {mark}')]",
                    f"open('{mark}', 'w').write('x')",
                    "'a' * 10**12"):
        reward, verdict = env.score(info["task_id"], env.answer_in_format(payload))
        assert reward == 0.0 and not verdict["passed"], (payload, verdict)
    assert not mark.exists()
    # and the task's gold still earns full marks from the confined scorer
    gold = env.gold_completion(env.pack.get(info["task_id"]))
    assert gold is not None and env.score(info["task_id"], gold)[1]["passed"]
