"""The live reward-hack monitor: how many of the samples a step credits, the env flags.

A reward that can be satisfied without the skill will be, and it shows first in the credited
samples (the ones whose verdict passed). Each step the trainer asks the env's ``flag`` hook about
each of them and logs the flagged share (``flags/credited_frac``) and one share per reason
(``flags/<reason>``). When the share over the last few steps is high and has climbed since the
window before, ``warning`` says so once, naming the reasons, so a person reads the samples.
The keys are absent on a step that credited nothing (a share of nothing is not 0%).
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.base import TaskEnv

#: Pooled over this many steps, the flagged share must reach WARN_SHARE and have climbed by
#: WARN_RISE since the window before (or since the last warning) to warn.
WINDOW = 5
WARN_SHARE = 0.3
WARN_RISE = 0.15
MIN_CREDITED = 8  # fewer credited samples in a window say nothing either way


@dataclass
class StepFlags:
    credited: int
    flagged: int
    reasons: Counter[str]


def flag_credited(env: TaskEnv, tasks: Sequence[Any], completions: Sequence[str],
                  infos: Sequence[dict[str, Any]], truncated: Sequence[bool]) -> StepFlags:
    """Run ``env.flag`` over the samples whose verdict passed."""
    credited = [i for i, info in enumerate(infos) if info.get("passed")]
    # "Too long" is judged against the step's median length, as the evaluation gates do.
    typical = statistics.median(len(c) for c in completions) if completions else None
    flagged, reasons = 0, Counter()
    for i in credited:
        flags = env.flag(tasks[i], completions[i], infos[i].get("verdict"),
                         truncated=bool(truncated[i]), typical_chars=typical)
        if flags:
            flagged += 1
            reasons.update({f.reason for f in flags})
    return StepFlags(len(credited), flagged, reasons)


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

    def observe(self, step: int, flags: StepFlags) -> str | None:
        """Record one step's flags; returns a warning when the flagged share has climbed."""
        self._steps.append((step, flags))
        self.total = StepFlags(self.total.credited + flags.credited,
                               self.total.flagged + flags.flagged, self.total.reasons + flags.reasons)
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
