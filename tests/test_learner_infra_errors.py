"""Infrastructure failures are never a way out: held-out accuracy counts
them as misses beside their number and refuses any figure past 1% of the samples; training
counts them per step (``samples/infra_errors``) and stops, in one line with a checkpoint, past
``--max-infra-error-rate`` of the last steps' samples. Figures below are computed by hand from
envs whose grading the test decides (``learner_helpers.InfraEnv``)."""

from __future__ import annotations

import json

import pytest

from learner import run_layout
from learner.evaluation.gates import episode_summary, heldout_accuracy
from learner.evaluation.heldout import EvalResult, evaluate, heldout_tasks
from learner.evaluation.infra import InfraCount, accuracy_line, counted_mean
from learner.evaluation.report import headline, key_figures, render_html
from learner.launch import format_eval
from learner.training.run_log import read_metrics
from learner.training.stops import InfraErrors, InfraWatch
from tests import learner_helpers as h

REASON = h.InfraEnv.REASON


def _record(i: int, *, infra: bool = False, **extra) -> dict:
    """Task ``i`` of a hand-made evaluation: it passes when ``i % 4 == 0``. A failed one claims
    a pass and full reward, as a lying grader's would: it must count as a miss all the same."""
    passed = infra or i % 4 == 0
    record = {"task_id": f"t{i}", "completion": "", "passed": passed, "reward": float(passed),
              "components": {"correct": float(passed)}, "infra_error": infra, "samples": 1,
              "samples_correct": int(passed and not infra), "samples_infra": int(infra)}
    if infra:
        record["infra_reason"] = REASON
    return {**record, **extra}


def _evaluation(failed: set[int], n: int = 100) -> EvalResult:
    return EvalResult(records=[_record(i, infra=i in failed) for i in range(n)])


# -- held-out evaluation: the rule on hand-made records ----------------------------------------
def test_one_failure_in_a_hundred_counts_as_a_miss_beside_the_accuracy():
    # Task 0 (a pass) failed for infrastructure: 24 of 100 passed, not 24 of 99 nor 25 of 100.
    m = _evaluation({0}).metrics()
    assert m["n"] == 100 and m["infra_errors"] == 1 and m["infra_reason"] == REASON
    assert m["accuracy"] == pytest.approx(0.24)
    assert m["reward"] == pytest.approx(0.24) and m["full_marks"] == pytest.approx(0.24)
    line = format_eval({f"eval/{k}": v for k, v in m.items()})
    assert line == ("accuracy 24.0%, full marks (all reward components) 24.0% on 100 held-out "
                    "tasks (1 infrastructure failure)")


def test_two_failures_in_a_hundred_refuse_every_figure_in_one_line():
    m = _evaluation({0, 1}).metrics()
    assert m["n"] == 100 and m["infra_errors"] == 2  # the denominator never shrinks
    assert m["accuracy"] is m["reward"] is m["full_marks"] is m["reward/correct"] is None
    line = format_eval({f"eval/{k}": v for k, v in m.items()})
    assert line == ("no accuracy: 2 of 100 samples were infrastructure failures, more than 1% "
                    f"(first: {REASON})")
    assert json.loads(json.dumps(m))["accuracy"] is None  # metrics.jsonl: null, with the count


def test_a_clean_evaluation_says_zero_failures():
    m = _evaluation(set(), n=40).metrics()
    assert m["accuracy"] == pytest.approx(10 / 40) and m["infra_errors"] == 0
    count = InfraCount(40, 0)
    assert accuracy_line(m["accuracy"], count) == (
        "held-out accuracy 25.0% on 40 tasks (0 infrastructure failures)")
    assert format_eval({f"eval/{k}": v for k, v in m.items()}).endswith(
        "on 40 held-out tasks (0 infrastructure failures)")


def test_pass_at_k_counts_failed_samples_and_refuses_past_one_percent():
    # 50 tasks x 2 samples; task i has i % 2 correct samples. One failed sample in 100: pass@2
    # is over every task still; two: none.
    def records(failed_tasks):
        return [_record(i, samples=2, samples_correct=i % 2,
                        samples_infra=int(i in failed_tasks), infra_reason=REASON)
                for i in range(50)]

    one = EvalResult(k=2, records=records({3})).metrics()
    assert one["sampled_infra_errors"] == 1
    assert one["pass@2"] == pytest.approx(25 / 50)  # n=2, c=1: pass@2 = 1 for 25 tasks
    two = EvalResult(k=2, records=records({3, 5})).metrics()
    assert two["sampled_infra_errors"] == 2 and two["pass@2"] is None
    assert two["accuracy"] == pytest.approx(13 / 50)  # the greedy pass had no failure


def _sample(i: int, *, infra: bool = False, group: int | None = None) -> dict:
    passed = infra or i % 4 == 0
    s = {"task_id": f"t{i}", "group": i if group is None else group, "passed": passed,
         "reward": float(passed), "rewards": {"correct": float(passed)}, "infra_error": infra}
    return {**s, "infra_reason": REASON} if infra else s


def test_gates_report_counts_failures_beside_accuracy_and_pass_at_k():
    greedy = [_sample(i, infra=i == 0) for i in range(100)]
    sampled = [_sample(4 * g, group=g) for g in range(25) for _ in range(4)]  # all pass
    accuracy, passk = heldout_accuracy(greedy, sampled, 4)
    assert accuracy["greedy"] == pytest.approx(0.24) and accuracy["n"] == 100
    assert accuracy["infra_errors"] == 1 and accuracy["refused"] is None
    assert passk["pass@4"] == 1.0 and passk["infra_errors"] == 0
    report = {"accuracy": accuracy, "pass_at_k": passk}
    assert headline(report) == "held-out accuracy 24.0% on 100 tasks (1 infrastructure failure)"

    greedy[1] = _sample(1, infra=True)
    sampled[0] = _sample(0, infra=True, group=0)
    sampled[1] = _sample(0, infra=True, group=0)
    accuracy, passk = heldout_accuracy(greedy, sampled, 4)
    assert accuracy["greedy"] is None and accuracy["reward"] is None
    line = f"no held-out accuracy: 2 of 100 samples were infrastructure failures, more than 1% " \
           f"(first: {REASON})"
    assert accuracy["refused"] == line and accuracy["infra_errors"] == 2
    assert passk["pass@4"] is None and passk["pass@1"] is None and passk["infra_errors"] == 2
    report = {"accuracy": accuracy, "pass_at_k": passk, "metadata": {}}
    assert headline(report) == line
    figures = key_figures(report)
    assert figures["accuracy (greedy)"] is None
    assert figures["infrastructure failures (greedy)"] == 2


def test_the_html_report_says_why_there_is_no_accuracy():
    greedy = [_sample(i, infra=i < 3) for i in range(10)]
    accuracy, passk = heldout_accuracy(greedy, greedy, 1)
    report = {"metadata": {}, "accuracy": accuracy, "pass_at_k": passk,
              "group_variance": {"zero_variance_groups": {}, "std": {}},
              "flagged": {"by_reason": {}, "samples": []}, "timing": {}}
    page = render_html(report, {})
    assert ("no held-out accuracy: 3 of 10 samples were infrastructure failures, more than 1% "
            f"(first: {REASON})") in page


def test_episode_accuracies_follow_the_same_rule():
    # 200 episodes, the odd ones called the tool; episode 0 (no call, a pass) failed.
    samples = [{**_sample(i, infra=i == 0), "turns": 1, "tool_calls": i % 2} for i in range(200)]
    summary = episode_summary(samples)
    assert summary["n"] == 200 and summary["infra_errors"] == 1
    # 49 of the 100 without a call passed (0, 4, ..., 196 but 0), not 49 of 99.
    assert summary["accuracy_without_tool"] == pytest.approx(49 / 100)
    assert summary["accuracy_with_tool"] == 0.0
    samples[2] = {**_sample(2, infra=True), "turns": 1, "tool_calls": 0}  # 2 of 100 without
    summary = episode_summary(samples)
    assert summary["accuracy_without_tool"] is None and summary["accuracy_with_tool"] == 0.0
    samples[1] = {**_sample(1, infra=True), "turns": 1, "tool_calls": 1}  # 3 of 200 overall
    summary = episode_summary(samples)
    assert summary["accuracy_with_tool"] is summary["accuracy_without_tool"] is None


def test_a_perturbed_prompt_score_follows_the_same_rule():
    from learner.evaluation.gates import _summarise

    one = _summarise([_sample(i, infra=i == 0) for i in range(100)], ["correct"])
    assert one["n"] == 100 and one["infra_errors"] == 1
    assert one["score"] == pytest.approx(0.24) and one["passed"] == pytest.approx(0.24)
    two = _summarise([_sample(i, infra=i < 2) for i in range(100)], ["correct"])
    assert two["score"] is two["passed"] is None and two["infra_errors"] == 2


def test_counted_mean_of_nothing_is_none():
    assert counted_mean([], lambda r: 1.0) is None


# -- the training run's window ----------------------------------------------------------------
def test_infra_watch_stops_past_the_rate_of_the_last_steps():
    watch = InfraWatch(0.05, window=3)
    assert watch.observe(1, 1, 20, REASON, 10) is None  # 1 of 20 = 5%: not more than
    stop = watch.observe(2, 2, 20, "disk gone", 10)  # 3 of 40 = 7.5%
    assert isinstance(stop, InfraErrors) and stop.step == 2
    assert str(stop) == ("grading failed for infrastructure on 3 of 40 samples in steps 1-2 "
                         "(7.5%, more than --max-infra-error-rate 0.05; first: container lost): "
                         "stopped after step 2 of 10 rather than train on the rest; checkpoint "
                         "saved")
    # Old steps leave the window: step 1's 5 failures count until step 3 (5 of 60: 8.3%),
    # then steps 4-5 are clean and step 6 fails 2 of 20 (2 of 60 over steps 4-6: 3.3%).
    watch = InfraWatch(0.05, window=3)
    for step, failed in [(1, 5), (2, 0), (3, 0), (4, 0), (5, 0)]:
        stopped = watch.observe(step, failed, 20, REASON, 10)
        assert (stopped is not None) == (step <= 3)
    assert watch.observe(6, 2, 20, REASON, 10) is None
    assert InfraWatch(1.0).observe(1, 20, 20, REASON, 10) is None  # 1: never stops
    assert InfraWatch(0.0).observe(1, 1, 1000, REASON, 10) is not None  # 0: any failure


# -- with a model loaded by from_pretrained -----------------------------------------------------
def test_heldout_evaluation_of_a_loaded_model_refuses_past_one_percent():
    base = h.InfraEnv()
    tasks = heldout_tasks(base, 100, split="train")  # the test split holds 29 tasks
    ids = [t.id for t in tasks]
    passing = tuple(ids[::4])  # 25 tasks pass, whatever the model writes
    model, tok = h.model(), h.tokenizer()
    run = dict(max_new_tokens=2, batch_size=50)
    one = evaluate(model, tok, h.InfraEnv(fail_tasks=(ids[0],), pass_tasks=passing), tasks,
                   **run).metrics()
    assert one["n"] == 100 and one["infra_errors"] == 1 and one["infra_reason"] == REASON
    assert one["accuracy"] == pytest.approx(24 / 100)
    two = evaluate(model, tok, h.InfraEnv(fail_tasks=(ids[0], ids[1]), pass_tasks=passing),
                   tasks, **run).metrics()
    assert two["n"] == 100 and two["infra_errors"] == 2 and two["accuracy"] is None
    assert format_eval({f"eval/{k}": v for k, v in two.items()}) == (
        "no accuracy: 2 of 100 samples were infrastructure failures, more than 1% "
        f"(first: {REASON})")


def test_training_past_the_rate_stops_in_one_line_with_a_checkpoint(tmp_path):
    from learner.training.trainer import GRPOTrainer

    # 2 prompts x 4 completions a step; the first 4 grading calls are lost containers.
    cfg = h.config(tmp_path, steps=3, eval=False)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(),
                    env=h.InfraEnv(fail_calls=(0, 1, 2, 3)))
    with pytest.raises(InfraErrors) as stopped:
        t.train()
    assert str(stopped.value) == (
        "grading failed for infrastructure on 4 of 8 samples in step 1 (50.0%, more than "
        f"--max-infra-error-rate 0.05; first: {REASON}): stopped after step 1 of 3 rather than "
        "train on the rest; checkpoint saved")
    assert stopped.value.exit_code == 1
    assert run_layout.latest(cfg.output_dir).name == "step-0000001"  # resumable there
    rows = read_metrics(cfg.output_dir)
    assert [r["step"] for r in rows] == [1]
    assert rows[0]["samples/infra_errors"] == 4 and rows[0]["accuracy"] is None
    t.close()


def test_training_under_the_rate_goes_on_and_logs_the_count(tmp_path):
    from learner.training.trainer import GRPOTrainer

    # 4 prompts x 8 completions a step: one lost container in steps 1 and 3 (1 of 32, then
    # 2 of 96 over the window: under the default 5%). Even-numbered calls pass.
    cfg = h.config(tmp_path, steps=3, eval=False, prompts_per_step=4, group_size=8)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(),
                    env=h.InfraEnv(fail_calls=(4, 68)))
    t.train()
    rows = read_metrics(cfg.output_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["samples/infra_errors"] for r in rows] == [1, 0, 1]
    # 16 of 32 pass in a clean step; 1 of 32 failed is more than 1%: no accuracy that step.
    assert [r["accuracy"] for r in rows] == [None, 0.5, None]
    assert all(r["group/trained"] > 0 and r["loss"] is not None for r in rows)
    t.close()
    from learner.plot import plot

    assert "infra_errors" in {path.stem for path in plot(cfg.output_dir)}


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_a_rate_outside_zero_to_one_is_refused_in_one_line(tmp_path, rate):
    from learner.config import ConfigError

    with pytest.raises(ConfigError, match=r"--max-infra-error-rate must be in \[0, 1\], got "):
        h.config(tmp_path, max_infra_error_rate=rate)


def test_the_command_line_prints_one_line_and_metrics_carry_null(tmp_path, capsys):
    from learner import run

    if h.SHORT_ENV_ID not in __import__("gymnasium").registry:
        __import__("gymnasium").register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    argv = ["--env", h.SHORT_ENV_ID, "--env-kwargs", '{"fail_marker": ""}', "--model", str(tiny),
            "--output-dir", str(out), "--steps", "3", "--prompts-per-step", "2",
            "--group-size", "2", "--max-new-tokens", "4", "--eval-size", "3",
            "--no-eval-perturbations", "--no-progress", "--num-threads", "1"]
    assert run.main(argv) == 1
    captured = capsys.readouterr()
    reason = "cannot reach a Docker engine"
    assert (f"warning: held-out evaluation at step 0: no held-out accuracy: 3 of 3 samples were "
            f"infrastructure failures, more than 1% (first: {reason})") in captured.out
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(
        "error: grading failed for infrastructure on 4 of 4 samples in step 1 (100.0%, more "
        f"than --max-infra-error-rate 0.05; first: {reason}): stopped after step 1 of 3 rather "
        "than train on the rest; checkpoint saved; resume with: python -m learner.run ")
    assert errors[0].endswith(f"--output-dir {out} --resume")
    rows = read_metrics(out)
    assert rows[0]["step"] == 0 and rows[0]["eval/accuracy"] is None
    assert rows[0]["eval/n"] == 3 and rows[0]["eval/infra_errors"] == 3
    assert rows[1]["step"] == 1 and rows[1]["samples/infra_errors"] == 4
    assert run_layout.latest(out).name == "step-0000001"
