"""eval.json, the evaluation result in the field's shape: the pass@k estimator and the standard
error by hand, the per-task rows and totals, and a tiny evaluation through ``learner.eval``."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from math import comb

import pytest

from learner.evaluation.result_shape import (
    ERROR_POLICY,
    ResultError,
    TaskRow,
    build_result,
    k_problem,
    load_result,
    mean_and_stderr,
    parse_ks,
    pass_at_k,
    result_from_samples,
    summary_line,
    task_rows,
    write_result,
)


# -- the estimators, by hand ------------------------------------------------------------------
def test_pass_at_k_hand_values():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)  # 1 - C(3,3)/C(5,3) = 1 - 1/10
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)  # pass@1 is c/n
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - 15 / 70)  # 1 - C(6,4)/C(8,4)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # n - c < k: every draw of k holds a correct one
    assert pass_at_k(4, 4, 4) == 1.0


def test_pass_at_k_is_stable_where_factorials_overflow_a_float():
    # C(3000, 1500) has ~900 digits: a float quotient of the two combinations overflows; the
    # product form does not. Reference: exact rational arithmetic.
    n, c, k = 3000, 2, 1500
    exact = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)
    with pytest.raises(OverflowError):
        float(comb(n, k))


def test_pass_at_k_refuses_k_above_n():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 8)
    assert k_problem([1, 4], 4) is None
    line = k_problem([1, 4, 8], 4)
    assert line is not None and "\n" not in line
    assert "--pass-k 8" in line and "--samples-per-task is 4" in line


def test_parse_ks():
    assert parse_ks("8,1,4,4") == [1, 4, 8]
    for bad in ("", "0,2", "a,2", "-1"):
        with pytest.raises(ValueError, match="--pass-k"):
            parse_ks(bad)


def test_standard_error_by_hand():
    # mean 0.5; squared deviations 0.25 + 0 + 0.25 + 0 = 0.5; s^2 = 0.5 / 3; se = sqrt(s^2 / 4)
    mean, se = mean_and_stderr([1.0, 0.5, 0.0, 0.5])
    assert mean == pytest.approx(0.5) and se == pytest.approx(math.sqrt(1 / 24))
    assert mean_and_stderr([0.3]) == (0.3, None)
    assert mean_and_stderr([]) == (None, None)


# -- rows and totals ---------------------------------------------------------------------------
def _samples(task_id, passed, errors=0, reward=None):
    out = [{"task_id": task_id, "passed": p, "reward": float(p) if reward is None else reward,
            "infra_error": False} for p in passed]
    # An infrastructure failure whose record claims a pass: still never correct.
    out += [{"task_id": task_id, "passed": True, "reward": 1.0, "infra_error": True,
             "infra_reason": "container lost"}] * errors
    return out


def test_result_by_hand():
    samples = (_samples("t1", [1, 1, 1, 0]) + _samples("t2", [1, 0, 0, 0])
               + _samples("t3", [0, 0, 0, 0], reward=0.25))
    result = result_from_samples(samples, [1, 2], env="grpo/X-v0", pack="p", pack_version="1",
                                 model={"name": "m"})
    # Per task success 0.75, 0.25, 0: mean 1/3; squared deviations (5/12)^2 + (1/12)^2 +
    # (4/12)^2 = 42/144; s^2 = 21/144; se = sqrt(21/144 / 3) = sqrt(7) / 12.
    assert result["success_rate"] == pytest.approx(1 / 3)
    assert result["success_stderr"] == pytest.approx(math.sqrt(7) / 12)
    # pass@2 per task: 1 (n - c = 1 < 2), 1 - C(3,2)/C(4,2) = 0.5, 0: mean 0.5.
    assert result["pass_at_k"] == {"pass@1": pytest.approx(1 / 3), "pass@2": pytest.approx(0.5)}
    assert result["pass_at_k_stderr"]["pass@2"] == pytest.approx(0.5 / math.sqrt(3))
    assert result["error_rate"] == 0.0 and result["refused"] is None
    assert (result["samples"], result["correct"], result["wrong"], result["errors"]) == \
        (12, 4, 8, 0)
    assert result["tasks"] == [
        {"task_id": "t1", "n": 4, "correct": 3, "errors": 0, "reward_mean": 0.75},
        {"task_id": "t2", "n": 4, "correct": 1, "errors": 0, "reward_mean": 0.25},
        {"task_id": "t3", "n": 4, "correct": 0, "errors": 0, "reward_mean": 0.25}]
    assert result["env"] == "grpo/X-v0" and result["pack_version"] == "1"


def test_infrastructure_errors_are_counted_apart_and_never_correct():
    rows = task_rows(_samples("t1", [1, 0, 0], errors=1) + _samples("t2", [1, 1, 1, 1]))
    assert rows[0] == TaskRow("t1", 4, 1, 1, pytest.approx(1 / 3))
    # 99 clean tasks and this one: 1 error in 400 samples, under 1%: figures given, the error
    # a miss in its task's denominator (t1: 1 / 4, not 1 / 3).
    clean = [TaskRow(f"c{i}", 4, 2, 0, 0.5) for i in range(99)]
    result = build_result([rows[0], *clean], [1], env="e", pack=None, pack_version=None,
                          model={}, first_error="container lost")
    assert result["error_rate"] == pytest.approx(1 / 400) and result["errors"] == 1
    assert result["wrong"] == 400 - 199 - 1
    assert result["success_rate"] == pytest.approx((0.25 + 99 * 0.5) / 100)
    assert ERROR_POLICY in result["error_policy"]
    # Past 1%: no success rate or pass@k, and one line that says why.
    refused = build_result(rows, [1, 4], env="e", pack=None, pack_version=None, model={},
                           first_error="container lost")
    assert refused["success_rate"] is None and refused["pass_at_k"] == {"pass@1": None,
                                                                        "pass@4": None}
    assert refused["error_rate"] == pytest.approx(1 / 8)
    assert "1 of 8 samples were infrastructure failures" in refused["refused"]
    assert "container lost" in refused["refused"]
    assert summary_line(refused) == refused["refused"]


def test_fewer_samples_than_k_is_refused():
    with pytest.raises(ValueError, match="pass@4 needs at least 4 samples"):
        build_result([TaskRow("t", 2, 1, 0, 0.5)], [1, 4], env="e", pack=None,
                     pack_version=None, model={})


def test_load_result_says_what_is_wrong_in_one_line(tmp_path):
    for content, expected in (
            (None, "no evaluation result at"), ("{", "not a readable evaluation result"),
            ('{"tasks": 3}', "no per-task rows"),
            ('{"tasks": [{"task_id": "t", "n": 2, "correct": 3, "errors": 0}]}',
             "malformed task row")):
        folder = tmp_path / str(abs(hash(expected)))
        folder.mkdir()
        if content is not None:
            (folder / "eval.json").write_text(content)
        with pytest.raises(ResultError, match=expected) as info:
            load_result(folder)
        assert "\n" not in str(info.value)


# -- a tiny evaluation through learner.eval ------------------------------------------------------
def test_learner_eval_writes_eval_json(tmp_path, capsys):
    from learner.eval import main
    from tests import learner_helpers as h

    model = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "out"
    code = main(["--model", str(model), "--env", "grpo/MathExact-v0",
                 "--env-kwargs", '{"pack": "arith", "level": 1}', "--limit", "3",
                 "--samples-per-task", "4", "--pass-k", "1,2,4", "--max-new-tokens", "4",
                 "--general-limit", "0", "--no-perturbations", "--output-dir", str(out)])
    assert code == 0
    result = load_result(out)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"result: {out / 'eval.json'}: {summary_line(result)}"
    assert summary_line(result).startswith(f"success {result['success_rate']:.3f} +- ")
    assert " over 3 tasks x 4 samples, pass@2 " in summary_line(result)
    assert result == json.loads((out / "eval.json").read_text())
    assert result["env"] == "grpo/MathExact-v0" and result["pack"] == "arith"
    assert result["pack_version"].startswith("1.1.0+")
    assert result["model"]["name"] == str(model) and result["model"]["path"] == str(model)
    assert len(result["model"]["weights_key"]) == 12
    assert result["sampling"]["samples_per_task"] == 4
    assert set(result["pass_at_k"]) == {"pass@1", "pass@2", "pass@4"}
    # The rows are the totals, and the figures are the rows'.
    rows = result["tasks"]
    assert len(rows) == result["n_tasks"] == 3 and all(r["n"] == 4 for r in rows)
    assert sum(r["n"] for r in rows) == result["samples"] == 12
    assert sum(r["correct"] for r in rows) == result["correct"]
    assert sum(r["errors"] for r in rows) == result["errors"]
    assert result["correct"] + result["wrong"] + result["errors"] == result["samples"]
    assert result["error_rate"] == result["errors"] / result["samples"]
    assert result["success_rate"] == pytest.approx(
        sum(r["correct"] / r["n"] for r in rows) / len(rows))
    assert result["pass_at_k"]["pass@1"] == pytest.approx(result["success_rate"])
    for k in (2, 4):
        assert result["pass_at_k"][f"pass@{k}"] == pytest.approx(
            sum(pass_at_k(r["n"], r["correct"], k) for r in rows) / len(rows))
    # The same samples as samples.jsonl's sampled ones.
    sampled = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    sampled = [s for s in sampled if s["source"] == "sampled"]
    assert [r["task_id"] for r in rows] == list(dict.fromkeys(s["task_id"] for s in sampled))
    assert sum(bool(s["passed"]) and not s["infra_error"] for s in sampled) == \
        result["correct"]


def test_pass_k_above_samples_per_task_is_one_line(capsys):
    from learner.eval import main

    with pytest.raises(SystemExit) as info:
        main(["--env", "grpo/MathExact-v0", "--samples-per-task", "4", "--pass-k", "1,8"])
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert "--pass-k 8 needs at least that many samples per task" in err[0], err
    with pytest.raises(SystemExit):
        main(["--pass-k", "x"])
    assert "--pass-k takes whole numbers" in capsys.readouterr().err


def test_write_then_load_round_trip(tmp_path):
    result = build_result([TaskRow("t1", 2, 1, 0, 0.5), TaskRow("t2", 2, 2, 0, 1.0)], [1, 2],
                          env="e", pack="p", pack_version="1", model={"name": "m"})
    path = write_result(result, tmp_path)
    assert path.name == "eval.json" and load_result(path) == result


def test_a_training_run_writes_its_result_before_and_after(tmp_path):
    from learner.evaluation.compare import paired_difference
    from learner.training.trainer import GRPOTrainer
    from tests import learner_helpers as h

    cfg = h.config(tmp_path, steps=1, eval_size=3, eval_k=2)
    GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv()).train()
    run = tmp_path / "run"
    start, end = load_result(run / "eval_start.json"), load_result(run)
    assert (start["model"]["step"], end["model"]["step"]) == (0, 1)
    assert start["model"]["run"] == str(run) and end["sampling"]["samples_per_task"] == 2
    assert set(end["pass_at_k"]) == {"pass@1", "pass@2"}
    # The rows are heldout.jsonl's records of the same evaluation, counted alike.
    records = [json.loads(line) for line in (run / "heldout.jsonl").read_text().splitlines()]
    last = [r for r in records if r["step"] == 1]
    assert [(r["task_id"], r["n"], r["correct"], r["errors"]) for r in end["tasks"]] == \
        [(r["task_id"], r["samples"], r["samples_correct"], r["samples_infra"]) for r in last]
    assert end["samples"] == 6 and end["correct"] == sum(r["samples_correct"] for r in last)
    assert paired_difference(start, end).shared == 3  # the two compare task by task
