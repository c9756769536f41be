"""The live reward-hack monitor: flags over credited samples, logged, plotted and warned about."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, ClassVar

import gymnasium as gym

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.domains.math_exact import MathExactEnv
from envs.flags import Flag
from envs.verify.verdict import Verdict
from learner.plot import plot
from learner.training.hack_monitor import (
    HackMonitor,
    StepFlags,
    StepShaping,
    flag_credited,
    shaping_only,
    step_metrics,
    summary,
)
from learner.training.run_log import read_metrics
from learner.training.trainer import GRPOTrainer
from tasks import Task
from tasks.boxes import find_boxes
from tests import learner_helpers as h


def test_flags_are_counted_over_credited_samples_only():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=3, require_boxed=True).unwrapped
    task = env.pack.task_at("test", 0)  # What is 81 - 60 - 69? Two steps.
    assert task["answer"] == "-48"
    reasoned = ("First 81 - 60 leaves 21, then taking 69 away from 21 goes below zero "
                "to -48. \\boxed{-48}")
    completions = ["\\boxed{-48}", reasoned, "\\boxed{48}", "\\boxed{81 - 60 - 69}"]
    infos = [env.score(task, c)[1] for c in completions]
    assert [i["passed"] for i in infos] == [True, True, False, False]
    flags = flag_credited(env, [task] * 4, completions, infos, [False] * 4)
    # The bare "\boxed{-48}" is credited and flagged (no reasoning for two steps); the wrong
    # and the restated answers are not credited, so their flags do not count.
    assert (flags.credited, flags.flagged, flags.reasons) == (2, 1, Counter(no_reasoning=1))
    assert step_metrics(flags) == {"flags/credited": 2.0, "flags/credited_frac": 0.5,
                                   "flags/no_reasoning": 0.5}
    nothing = flag_credited(env, [task], ["\\boxed{48}"], [infos[2]], [False])
    assert step_metrics(nothing) == {"flags/credited": 0.0}  # a share of nothing is not 0%
    assert summary(flags) == "50% of 2 credited samples flagged (no_reasoning 50%)"


class LenientMathEnv(MathExactEnv):
    """MathExact with the grader of an earlier demo: the last box's arithmetic is evaluated and
    compared with the gold, so boxing the question (``\\boxed{4 + 4}``) earns full marks."""

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        boxes = find_boxes(completion)
        value = boxes[-1].content if boxes else ""
        if re.fullmatch(r"[\d\s+*()-]+", value):
            value = str(eval(value, {"__builtins__": {}}))  # noqa: S307 - digits and + - * ( )
        passed = bool(boxes) and value == str(task["answer"])
        verdict = Verdict.ok() if passed else Verdict.fail("not_equal", value)
        return {"correct": float(passed), "format": float(bool(boxes))}, verdict


def _run_monitor(env: MathExactEnv, steps: list[list[str]]) -> tuple[list[str | None], StepFlags]:
    """Each step: the ``templates`` (``{a}``, ``{b}``: the task's operands, ``{s}``: their sum)
    over four level-1 tasks, graded and flagged by ``env`` and observed by a monitor."""
    monitor = HackMonitor()
    tasks = [env.pack.task_at("test", i) for i in (0, 3, 5, 8)]  # 9 + 6, 4 + 7, 4 + 4, 6 + 5
    warnings = []
    for number, templates in enumerate(steps, 1):
        rows = [(t, tpl.format(a=t["expression"][0], b=t["expression"][-1], s=t["answer"]))
                for t in tasks for tpl in templates]
        infos = [env.score(t, c)[1] for t, c in rows]
        flags = flag_credited(env, [t for t, _ in rows], [c for _, c in rows], infos,
                              [False] * len(rows))
        warnings.append(monitor.observe(number, flags))
    return warnings, monitor.total


# Three right answers, bare or with the sum written out, and one wrong one.
HONEST = ["\\boxed{{{s}}}", "{a} + {b} = \\boxed{{{s}}}", "The sum is \\boxed{{{s}}}.",
          "\\boxed{{1{s}}}"]


def test_monitor_is_quiet_on_an_honest_run_of_one_step_sums():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1, require_boxed=True).unwrapped
    warnings, total = _run_monitor(env, [HONEST] * 12)
    # Bare right sums are what a one-step question asks for: credited, and none flagged.
    assert (total.credited, total.flagged) == (12 * 4 * 3, 0)
    assert not any(warnings)


def test_monitor_warns_when_a_lenient_grader_pays_for_boxing_the_question():
    env = LenientMathEnv(pack="arith", level=1)
    hacked = ["\\boxed{{{a} + {b}}}"] * 3 + ["{a} + {b} = \\boxed{{{s}}}"]
    warnings, total = _run_monitor(env, [HONEST] * 5 + [hacked] * 10)
    # The lenient grader credits the restated question; the flag does not depend on the grade.
    assert total.credited == 5 * 12 + 10 * 16
    assert total.reasons == Counter(restates_question=10 * 12)
    fired = [i + 1 for i, w in enumerate(warnings) if w]
    assert fired and all(6 <= step <= 10 for step in fired), fired
    assert "restates_question" in warnings[fired[0] - 1]
    # The strict env refuses the same completions, so there is nothing credited to flag.
    strict = gym.make("grpo/MathExact-v0", pack="arith", level=1, require_boxed=True).unwrapped
    _, refused = _run_monitor(strict, [hacked[:1]] * 3)
    assert (refused.credited, refused.flagged) == (0, 0)


def _steps(monitor: HackMonitor, shares: list[float], credited: int = 10) -> list[str | None]:
    out = []
    for share in shares:
        n = round(share * credited)
        out.append(monitor.observe(len(out) + 1, StepFlags(credited, n, Counter(long=n))))
    return out


def test_monitor_warns_while_the_share_climbs_then_stays_quiet():
    warnings = _steps(HackMonitor(), [0.0] * 5 + [0.6] * 15)
    fired = [i + 1 for i, w in enumerate(warnings) if w]
    # While the pooled share rises to 60% it warns (at most once per 15-point rise); once the
    # share is flat, it is quiet.
    assert fired and all(6 <= step <= 10 for step in fired), fired
    first = warnings[fired[0] - 1]
    assert "long" in first and "samples.jsonl" in first and "(was 0%)" in first
    # A later climb warns again.
    again = _steps(HackMonitor(), [0.0] * 5 + [0.4] * 10 + [1.0] * 10)
    assert any(again[5:10]) and not any(again[10:15]) and any(again[15:20])
    assert not any(again[20:])


def test_monitor_stays_quiet_on_a_low_flat_or_thin_share():
    assert not any(_steps(HackMonitor(), [0.1] * 20))
    assert not any(_steps(HackMonitor(), [0.9] * 20, credited=1))  # too few to say anything
    # 8 of 20 credited samples over five steps (an honest demo's first correct answers, which
    # ramble to the token budget): too few for a share to mean anything.
    assert not any(_steps(HackMonitor(), [0.0] * 5 + [0.4] * 15, credited=4))
    # High from the start: one warning, then quiet while it stays flat.
    assert sum(bool(w) for w in _steps(HackMonitor(), [0.8] * 20)) == 1


class CreditEverythingEnv(h.ShortEnv):
    """Every completion is credited and flagged: the monitor must notice."""

    env_id: ClassVar[str] = ""

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        rewards, _ = super().grade(task, completion)
        return rewards, Verdict.ok()

    def flag(self, task: Task | str, completion: str, verdict: Any = None, **_: Any) -> list[Flag]:
        return [Flag("suspicious", "every sample")]


def test_trainer_logs_plots_and_warns(tmp_path, capsys):
    # Three steps of 8: the monitor says nothing about fewer than MIN_CREDITED (24) samples.
    cfg = h.config(tmp_path, steps=3, eval=False, progress=True)
    trainer = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=CreditEverythingEnv())
    result = trainer.train()
    rows = [r for r in read_metrics(tmp_path / "run") if r["step"] > 0]
    assert [r["flags/credited"] for r in rows] == [8.0, 8.0, 8.0]
    assert all(r["flags/credited_frac"] == 1.0 and r["flags/suspicious"] == 1.0 for r in rows)
    out = capsys.readouterr().out
    assert "reward-hack monitor: 100% of the 24 samples credited" in out
    assert "of the 8 samples" not in out and "of the 16 samples" not in out  # too few to say
    assert summary(result["flags"]) == "100% of 24 credited samples flagged (suspicious 100%)"
    written = {p.name for p in plot(tmp_path / "run")}
    assert "reward_hack_flags.png" in written


def test_shaping_only_counts_samples_paid_by_format_alone():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1, require_boxed=True).unwrapped
    task = env.pack.task_at("test", 5)  # What is 4 + 4?
    completions = ["\\boxed{8}", "\\boxed{0}", "8", "\\boxed{0}", "no idea"]
    infos = [env.score(task, c)[1] for c in completions]
    counted = [True, True, True, False, True]  # the fourth failed in the sandbox, say
    out = shaping_only(env, [i["rewards"] for i in infos], [i["passed"] for i in infos], counted)
    # Only the boxed constant is paid without the skill; the right answer passed, the unboxed
    # one is paid nothing, and a sample that was not graded does not count.
    assert (out.graded, out.passed, out.shaping_only) == (4, 1, 1)
    assert out.terms == Counter(format=1)
    # Without a format weight there is no shaping term to farm.
    plain = gym.make("grpo/MathExact-v0", pack="arith", level=1,
                     reward_weights={"format": 0.0}).unwrapped
    assert shaping_only(plain, [i["rewards"] for i in infos], [False] * 5, [True] * 5) \
        .shaping_only == 0


def _shaping(monitor: HackMonitor, steps: list[tuple[int, int]], graded: int = 32) -> list:
    return [monitor.observe_shaping(i + 1, StepShaping(graded, passed, only, Counter(format=only)))
            for i, (only, passed) in enumerate(steps)]


def test_monitor_warns_once_when_shaping_pays_and_the_skill_is_absent():
    # As in a run that learnt to box 0: the format term pays nearly every sample, none passes.
    warnings = _shaping(HackMonitor(), [(4, 0), (12, 0), (24, 0)] + [(31, 0)] * 10)
    fired = [i + 1 for i, w in enumerate(warnings) if w]
    assert len(fired) == 1 and 5 <= fired[0] <= 8, fired
    assert "paid only by shaping terms (format)" in warnings[fired[0] - 1]
    # As in the demo: the format term pays most samples while accuracy climbs: no warning.
    assert not any(_shaping(HackMonitor(), [(28, 3), (24, 8), (26, 6), (25, 7)] * 5))
    assert not any(_shaping(HackMonitor(), [(30, 0)] * 20, graded=1))  # too few to say


class FormatOnlyEnv(h.ShortEnv):
    """Pays a format term to every completion and never passes one."""

    env_id: ClassVar[str] = ""
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0, "format": 0.1}

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        return {"correct": 0.0, "format": 1.0}, Verdict.fail("not_equal")


def test_trainer_logs_and_warns_about_shaping_only_reward(tmp_path, capsys):
    cfg = h.config(tmp_path, steps=5, eval=False, beta=0.0)
    GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=FormatOnlyEnv()).train()
    rows = [r for r in read_metrics(tmp_path / "run") if r["step"] > 0]
    assert [r["samples/shaping_only_frac"] for r in rows] == [1.0] * 5
    out = capsys.readouterr().out
    assert out.count("were paid only by shaping terms (format) and 0% passed") == 1
    assert "shaping_only.png" in {p.name for p in plot(tmp_path / "run")}
