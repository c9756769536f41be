"""The live reward-hack monitor: how many of the samples a step credits, the env flags.

A reward that can be satisfied without the skill will be, and it shows first in the credited
samples (the ones whose verdict passed). Each step the trainer asks the env's ``flag`` hook about
each of them and logs the flagged share (``flags/credited_frac``) and one share per reason
(``flags/<reason>``). When the share over the last few steps is high and has climbed since the
window before, ``warning`` says so once, naming the reasons, so a person reads the samples.
The keys are absent on a step that credited nothing (a share of nothing is not 0%).

The other way to be paid without the skill is a shaping term: ``format`` (or ``tool_ok``) pays
whatever the answer, so a policy that cannot solve the tasks can still box a constant and
collect it. Every step logs ``samples/shaping_only_frac``, the share of graded samples paid by a
shaping term alone (the env's reward components outside ``check_components``) that did not pass.
When nearly all samples of the last few steps are such and nearly none passed, ``warning`` says
so once: the reward is now the shaping term's, and groups that all earn it teach nothing.
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envs.contract import LearnerEnv

if TYPE_CHECKING:
    from learner.training.distributed import Processes
    from learner.training.samples import StepSamples

#: Pooled over this many steps, the flagged share must reach WARN_SHARE and have climbed by
#: WARN_RISE since the window before (or since the last warning) to warn.
WINDOW = 5
WARN_SHARE = 0.3
WARN_RISE = 0.15
#: Fewer credited samples in a window say nothing either way: 3 flagged of 8 is 38%, with a
#: 95% interval of about 14-69%; from 24 on, a 30% share's interval is about 15-50%.
MIN_CREDITED = 24
#: Pooled over WINDOW steps: at least this share of graded samples paid by shaping alone, and
#: at most SKILL_ABSENT of them passed, is a policy farming the shaping terms.
SHAPING_ONLY = 0.8
SKILL_ABSENT = 0.05


@dataclass
class StepFlags:
    credited: int
    flagged: int
    reasons: Counter[str]

    @staticmethod
    def merge(parts: Sequence[StepFlags]) -> StepFlags:
        """The counts of several processes (or steps) together."""
        return StepFlags(sum(p.credited for p in parts), sum(p.flagged for p in parts),
                         sum((p.reasons for p in parts), Counter()))


def flag_credited(env: LearnerEnv, tasks: Sequence[Any], completions: Sequence[str],
                  infos: Sequence[dict[str, Any]], truncated: Sequence[bool]) -> StepFlags:
    """Run ``env.flag`` over the samples whose verdict passed."""
    credited = [i for i, info in enumerate(infos) if info.get("passed")]
    # "Too long" is judged against the step's median length, as the evaluation gates do.
    typical = statistics.median(len(c) for c in completions) if completions else None
    flagged, reasons = 0, Counter[str]()
    for i in credited:
        flags = env.flag(tasks[i], completions[i], infos[i].get("verdict"),
                         truncated=bool(truncated[i]), typical_chars=typical)
        if flags:
            flagged += 1
            reasons.update({f.reason for f in flags})
    return StepFlags(len(credited), flagged, reasons)


@dataclass
class StepShaping:
    graded: int  # samples with a verdict (sandbox failures left out)
    passed: int
    shaping_only: int  # paid by a shaping term and by nothing else, and not passed
    terms: Counter[str]  # the shaping terms that paid them

    @staticmethod
    def merge(parts: Sequence[StepShaping]) -> StepShaping:
        """The counts of several processes together."""
        return StepShaping(sum(p.graded for p in parts), sum(p.passed for p in parts),
                           sum(p.shaping_only for p in parts),
                           sum((p.terms for p in parts), Counter()))


def shaping_only(env: LearnerEnv, components: Sequence[Mapping[str, float]],
                 passed: Sequence[bool], graded: Sequence[bool]) -> StepShaping:
    """Count the graded samples paid only by the env's shaping terms (weighted components
    outside ``check_components``) without passing."""
    skill = set(env.check_components)
    shaping = [k for k, w in env.reward_weights.items() if w and k not in skill]
    out = StepShaping(0, 0, 0, Counter())
    for comp, ok, counted in zip(components, passed, graded, strict=True):
        if not counted:
            continue
        out.graded += 1
        out.passed += bool(ok)
        paid = [k for k in shaping if comp.get(k, 0.0) > 0]
        if paid and not ok and not any(comp.get(k, 0.0) > 0 for k in skill):
            out.shaping_only += 1
            out.terms.update(paid)
    return out


def step_metrics(flags: StepFlags) -> dict[str, float]:
    """``flags/credited`` (a count) and, when anything was credited, the flagged shares."""
    out: dict[str, float] = {"flags/credited": float(flags.credited)}
    if flags.credited:
        out["flags/credited_frac"] = flags.flagged / flags.credited
        for reason, n in sorted(flags.reasons.items()):
            out[f"flags/{reason}"] = n / flags.credited
    return out


@dataclass
class HackMonitor:
    window: int = WINDOW
    warn_share: float = WARN_SHARE
    warn_rise: float = WARN_RISE
    min_credited: int = MIN_CREDITED
    _steps: deque[tuple[int, StepFlags]] = field(default_factory=lambda: deque(maxlen=2 * WINDOW))
    _warned_at: float | None = None
    total: StepFlags = field(default_factory=lambda: StepFlags(0, 0, Counter()))
    _shaping: deque[tuple[int, StepShaping]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    _shaping_warned: bool = False

    def observe_shaping(self, step: int, shaping: StepShaping) -> str | None:
        """Record one step's shaping counts; returns a warning (once per run) when the last
        ``window`` steps were paid by shaping terms alone, with the skill nearly absent."""
        self._shaping.append((step, shaping))
        steps = list(self._shaping)[-self.window:]
        graded = sum(s.graded for _, s in steps)
        if self._shaping_warned or len(steps) < self.window or graded < self.min_credited:
            return None
        only = sum(s.shaping_only for _, s in steps) / graded
        passed = sum(s.passed for _, s in steps) / graded
        if only < SHAPING_ONLY or passed > SKILL_ABSENT:
            return None
        self._shaping_warned = True
        terms: Counter[str] = Counter()
        for _, s in steps:
            terms.update(s.terms)
        return (f"reward-hack monitor: {only:.0%} of the {graded} samples graded in steps "
                f"{steps[0][0]}-{steps[-1][0]} were paid only by shaping terms "
                f"({', '.join(sorted(terms))}) and {passed:.0%} passed: the reward now comes from "
                "what can be earned without the skill, and groups that all earn it teach "
                "nothing. Read them in samples.jsonl before trusting the reward.")

    def observe(self, step: int, flags: StepFlags) -> str | None:
        """Record one step's flags; returns a warning when the flagged share has climbed."""
        self._steps.append((step, flags))
        self.total = StepFlags.merge([self.total, flags])
        steps = list(self._steps)
        recent, before = steps[-self.window:], steps[:-self.window][-self.window:]
        share, credited, reasons = _pool(recent)
        if credited < self.min_credited or share < self.warn_share:
            return None
        prev_share, prev_credited, _ = _pool(before)
        baseline = self._warned_at if self._warned_at is not None else (
            prev_share if prev_credited >= self.min_credited else 0.0)
        if share < baseline + self.warn_rise:
            return None
        self._warned_at = share
        top = ", ".join(f"{r} {n / credited:.0%}" for r, n in reasons.most_common(3))
        since = f" (was {prev_share:.0%})" if prev_credited >= self.min_credited else ""
        return (f"reward-hack monitor: {share:.0%} of the {credited} samples credited in steps "
                f"{recent[0][0]}-{recent[-1][0]} are flagged{since}: {top}. "
                "Read them in samples.jsonl before trusting the reward.")


def summary(flags: StepFlags) -> str:
    """One line: the flagged share of credited samples and its main reasons."""
    if not flags.credited:
        return "no sample was credited"
    top = ", ".join(f"{r} {n / flags.credited:.0%}" for r, n in flags.reasons.most_common(4))
    return (f"{flags.flagged / flags.credited:.0%} of {flags.credited} credited samples flagged"
            + (f" ({top})" if top else ""))


def _pool(steps: list[tuple[int, StepFlags]]) -> tuple[float, int, Counter[str]]:
    credited = sum(f.credited for _, f in steps)
    flagged = sum(f.flagged for _, f in steps)
    reasons: Counter[str] = Counter()
    for _, f in steps:
        reasons.update(f.reasons)
    return (flagged / credited if credited else 0.0), credited, reasons


def step_counts(env: LearnerEnv, samples: StepSamples, group_size: int, procs: Processes
                ) -> tuple[StepFlags, StepShaping]:
    """A training step's ``flag_credited`` and ``shaping_only`` counts, summed over
    processes."""
    roll, scores = samples.rollout, samples.scores
    flags = flag_credited(env, [t for t in samples.tasks for _ in range(group_size)],
                          roll.texts, scores.infos, roll.truncated.tolist())
    shaping = shaping_only(env, scores.components, scores.passed, samples.graded.tolist())
    return (StepFlags.merge(procs.gather_objects(flags)),
            StepShaping.merge(procs.gather_objects(shaping)))
