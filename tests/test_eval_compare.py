"""``python -m learner.evaluation compare``: the paired difference of two eval.json files, by
hand, and its one-line errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from learner.evaluation.__main__ import main
from learner.evaluation.compare import CompareError, paired_difference

ROOT = Path(__file__).resolve().parents[1]


def _result(correct: dict[str, int], n: int = 4, **fields) -> dict:
    """A hand-made eval.json: ``correct`` samples of ``n`` per task."""
    rows = [{"task_id": t, "n": n, "correct": c, "errors": 0, "reward_mean": c / n}
            for t, c in correct.items()]
    success = sum(c / n for c in correct.values()) / len(correct)
    return {"env": "grpo/MathExact-v0", "pack": "arith", "pack_version": "1.1.0",
            "model": {"name": fields.pop("name", "m")}, "sampling": {"samples_per_task": n},
            "n_tasks": len(rows), "success_rate": success, "success_stderr": 0.1,
            "error_rate": 0.0, "refused": None, "tasks": rows, **fields}


A = _result({"t1": 2, "t2": 1, "t3": 4, "t4": 0}, name="start")
B = _result({"t1": 3, "t2": 2, "t3": 4, "t4": 1, "t5": 4}, name="trained")


def test_paired_difference_by_hand():
    # Shared t1..t4; per task A 0.5, 0.25, 1, 0 and B 0.75, 0.5, 1, 0.25: differences 0.25,
    # 0.25, 0, 0.25, mean 0.1875; deviations 1/16, 1/16, -3/16, 1/16 sum to 12/256 squared,
    # s^2 = 12/256 / 3 = 1/64; se = sqrt(1/64 / 4) = 1/16; z = 0.1875 / 0.0625 = 3.
    c = paired_difference(A, B)
    assert (c.shared, c.only_a, c.only_b) == (4, 0, 1)
    assert c.success_a == pytest.approx(0.4375) and c.success_b == pytest.approx(0.625)
    assert c.diff == pytest.approx(0.1875) and c.stderr == pytest.approx(0.0625)
    assert c.z == pytest.approx(3.0) and c.significant
    # Unpaired, the standard error would be ~0.24 (the tasks' spread): not significant.
    unpaired = math.sqrt(sum((v - 0.4375) ** 2 for v in (0.5, 0.25, 1, 0)) / 3 / 4
                         + sum((v - 0.625) ** 2 for v in (0.75, 0.5, 1, 0.25)) / 3 / 4)
    assert c.diff / unpaired < 1.96 < c.z


def test_a_small_mixed_difference_is_not_significant():
    # B per task 0.75, 0, 1, 0.25 against A's 0.5, 0.25, 1, 0: differences +0.25, -0.25, 0,
    # +0.25, mean 1/16; deviations 3/16, -5/16, -1/16, 3/16, squares summing to 44/256;
    # s^2 = 44/256 / 3; se = sqrt(s^2 / 4) = sqrt(11/768); z = (1/16) / se ~ 0.52.
    c = paired_difference(A, _result({"t1": 3, "t2": 0, "t3": 4, "t4": 1}))
    assert c.diff == pytest.approx(1 / 16) and c.stderr == pytest.approx(math.sqrt(11 / 768))
    assert c.z == pytest.approx((1 / 16) / math.sqrt(11 / 768)) and not c.significant
    # Identical results: a zero difference with zero spread is z 0, not a division by zero.
    same = paired_difference(A, A)
    assert (same.diff, same.stderr, same.z, same.significant) == (0.0, 0.0, 0.0, False)


def test_cannot_compare(tmp_path):
    with pytest.raises(CompareError, match="share no task id"):
        paired_difference(A, _result({"x1": 1, "x2": 2}))
    with pytest.raises(CompareError, match="at least two"):
        paired_difference(A, _result({"t1": 1, "x2": 2}))
    refused = {**A, "refused": "no success rate: 3 of 16 samples were infrastructure failures"}
    with pytest.raises(CompareError, match="A has no success rate to compare: no success"):
        paired_difference(refused, B)


def _write(folder: Path, result: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text(json.dumps(result))
    return folder


def test_compare_prints_the_difference(tmp_path, capsys):
    a, b = _write(tmp_path / "a", A), _write(tmp_path / "b", {**B, "pack_version": "1.2.0"})
    assert main(["compare", str(a), str(b / "eval.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"A: {a}  start  success 0.438 +- 0.100 (4 tasks")
    assert out[2] == "shared tasks: 4 (only in A: 0, only in B: 1); on them A 0.438, B 0.625"
    assert out[3] == ("B - A: +0.188 +- 0.062 (paired standard error over 4 tasks), z = +3.00: "
                      "significant at 95% (needs |z| > 1.96)")
    assert out[4] == "note: the evaluations differ in pack_version: 1.1.0 vs 1.2.0"


def test_compare_errors_are_one_line(tmp_path, capsys):
    a = _write(tmp_path / "a", A)
    disjoint = _write(tmp_path / "d", _result({"x1": 1, "x2": 2}))
    for argv, expected in ((["compare", str(a), str(tmp_path / "nowhere")],
                            "error: no evaluation result at"),
                           (["compare", str(a), str(disjoint)], "error: the two results share "
                                                                "no task id")):
        assert main(argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(expected), err


def test_compare_command_line(tmp_path):
    """The module as users run it, in a subprocess: output, exit codes, and no torch."""
    a, b = _write(tmp_path / "a", A), _write(tmp_path / "b", B)
    code = ("import runpy, sys; sys.argv = ['x', 'compare', sys.argv[1], sys.argv[2]]\n"
            "try:\n    runpy.run_module('learner.evaluation', run_name='__main__')\n"
            "except SystemExit as exc:\n    print('exit', exc.code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(a), str(b)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.stdout.splitlines()[-1] == "exit 0 False", done.stdout + done.stderr
    assert "z = +3.00: significant at 95%" in done.stdout
    done = subprocess.run([sys.executable, "-m", "learner.evaluation", "compare", str(a),
                           str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = subprocess.run([sys.executable, "-m", "learner.evaluation", "compare", str(a)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "RUN_B" in done.stderr
