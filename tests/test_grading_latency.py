"""Grading latency where users look: every step logs the per-sample grading time (p50, p99,
max) and how many samples hit a time limit while graded, in metrics.jsonl, the progress line
and the plots; each env says what hitting a time limit means in its domain."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, ClassVar

import gymnasium as gym
import pytest

from envs.verify import math as m
from envs.verify.verdict import Verdict
from learner import plot
from learner.training.distributed import Processes
from learner.training.loop import progress as _progress
from learner.training.run_log import read_metrics
from learner.training.step_metrics import grading_metrics
from learner.training.trainer import GRPOTrainer
from tasks import Task
from tests import learner_helpers as h


class HalfTimeoutEnv(h.ShortEnv):
    """Grades a completion of even length as if its checker had run out of time."""

    default_weights: ClassVar[dict[str, float]] = {"short": 1.0, "digit": 0.5}

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        rewards, verdict = super().grade(task, completion)
        return rewards, (Verdict.fail("timeout") if len(completion) % 2 == 0 else verdict)


def one_process() -> Processes:
    return Processes(SimpleNamespace(num_processes=1, process_index=0))


def test_each_domain_says_when_grading_hit_a_time_limit():
    # Math: the checker's worker stopped at ``timeout``.
    env = gym.make("grpo/MathExact-v0", pack="arith").unwrapped
    m.clear_cache()
    stopped = m.verify(r"\frac{x^3-1}{x-1}", r"x^2+x+1", timeout=1e-4)
    assert stopped.reason == "timeout" and env.hit_time_limit(stopped)
    assert not env.hit_time_limit(m.verify("5", r"\boxed{5}"))
    m.clear_cache()
    # Code: a test case or the program's whole run out of wall time, whatever the verdict.
    code = gym.make("grpo/CodeTests-v0").unwrapped
    case = Verdict(False, 0.5, "failed_tests", "", {"case_reasons": {"0": "passed",
                                                                    "1": "timeout"}})
    whole = Verdict(False, 0.0, "timeout", "", {"status": "timeout", "case_reasons": {}})
    ran = Verdict(False, 0.5, "failed_tests", "", {"status": "ok",
                                                   "case_reasons": {"0": "failed"}})
    assert code.hit_time_limit(case) and code.hit_time_limit(whole)
    assert not code.hit_time_limit(ran)
    # JSON has no time limit: its verdicts never hit one.
    json_env = gym.make("grpo/JsonSchema-v0").unwrapped
    task = json_env.pack.task_at("test", 0)
    _, info = json_env.score(task, "{}")
    assert info["hit_time_limit"] is False


def test_score_marks_the_info():
    env = HalfTimeoutEnv()
    task = env.pack.task_at("train", 0)
    assert env.score(task, "ab")[1]["hit_time_limit"] is True
    assert env.score(task, "abc")[1]["hit_time_limit"] is False
    assert env.score(task, "abc")[1]["grading_s"] >= 0


def test_grading_metrics_are_the_per_sample_quantiles_and_the_timeout_count():
    seconds = [0.1 * i for i in range(1, 11)] + [30.0]  # ten quick verdicts, one stalled
    infos: list[dict[str, Any]] = [{"grading_s": s, "hit_time_limit": s == 30.0}
                                   for s in seconds]
    infos.append({"reason": "sandbox_error"})  # no grading_s: not a measurement
    out = grading_metrics(infos, one_process())
    assert out["samples/grade_timeouts"] == 1
    assert out["time/grade_p50_s"] == pytest.approx(0.6)  # the 6th of 11, by hand
    # p99 interpolates between the 10th (1.0 s) and 11th (30 s) values: 1 + 0.9 * 29.
    assert out["time/grade_p99_s"] == pytest.approx(1.0 + 0.9 * 29.0)
    assert out["time/grade_max_s"] == 30.0
    assert grading_metrics([], one_process()) == {"samples/grade_timeouts": 0}


def test_every_step_logs_grading_latency_to_metrics_progress_and_plots(tmp_path):
    cfg = h.config(tmp_path, steps=1, eval=False)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=HalfTimeoutEnv())
    t.train()
    row = read_metrics(tmp_path / "run")[-1]
    step = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    assert step["step"] == 1
    assert 0 <= row["time/grade_p50_s"] <= row["time/grade_p99_s"] <= row["time/grade_max_s"]
    texts = [c for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
             for c in json.loads(line)["completions"]]
    assert len(texts) == 2 * 4  # every sample of the step was written (2 groups of 4)
    assert row["samples/grade_timeouts"] == sum(len(c) % 2 == 0 for c in texts)
    shown = _progress(row)
    assert shown["grade_p99"].startswith(f"{row['time/grade_p99_s']:.2f}s")
    if row["samples/grade_timeouts"]:
        assert shown["grade_p99"].endswith(f"({row['samples/grade_timeouts']} timed out)")
    written = {p.name for p in plot.plot(tmp_path / "run")}
    assert {"grading_time.png", "grading_timeouts.png"} <= written


def test_a_flag_reasons_line_starts_at_zero_on_steps_that_credited_without_it(tmp_path):
    rows = [{"step": 1, "flags/credited": 4.0, "flags/credited_frac": 0.5,
             "flags/no_reasoning": 0.5},
            {"step": 2, "flags/credited": 0.0},  # nothing credited: no share, a gap
            {"step": 3, "flags/credited": 4.0, "flags/credited_frac": 0.75,
             "flags/no_reasoning": 0.5, "flags/long": 0.25}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = plot.read_metrics(tmp_path)
    assert plot.panel_series(metrics, "reward_hack_flags", "flags/long") == ([1, 3], [0.0, 0.25])
    assert plot.panel_series(metrics, "reward_hack_flags", "flags/no_reasoning") \
        == ([1, 3], [0.5, 0.5])
    assert "reward_hack_flags.png" in {p.name for p in plot.plot(tmp_path)}
