"""The lines a run prints for its user besides the progress bar: the plan up front, the time
the whole run should take once the first step is timed, and a word when the first steps gave
no learning signal at all (the env says what to try: domain knowledge stays in envs/)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from learner.config import Config

if TYPE_CHECKING:
    from envs.contract import LearnerEnv

#: Steps whose groups must all lack reward spread before the run says it learns nothing.
NO_SIGNAL_STEPS = 3
#: The bar; the estimated time left is the first item of its postfix (``eta_left``): tqdm's
#: own follows a moving average of the rate, which one slow step throws off.
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``2 h 05 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


def plan_line(config: Config, env: LearnerEnv, start: int) -> str:
    """What the run will do: steps, P x G, the completion budget, the env and its pack."""
    c = config
    where = getattr(getattr(env, "spec", None), "id", None) or c.env
    pack = getattr(getattr(env, "pack", None), "name", None)
    left = f"steps {start + 1}-{c.steps} of {c.steps}" if start else f"{c.steps} steps"
    return (f"plan: {left}, each of {c.prompts_per_step} prompts x {c.group_size} completions "
            f"(P x G = {c.prompts_per_step * c.group_size}) of up to {c.max_new_tokens} new "
            f"tokens, on {where}" + (f" (pack {pack})" if pack else ""))


def estimate_line(step_s: float, steps_left: int, evaluates: bool) -> str:
    """The first step's time and what the rest should take at that pace."""
    rest = (f"the {steps_left} step{'s' if steps_left > 1 else ''} left should take "
            f"about {duration(step_s * steps_left)}"
            if steps_left else "that was the last step")
    return (f"first step took {duration(step_s)}; {rest}"
            + (" plus the evaluations" if evaluates and steps_left else ""))


def eta_left(step_seconds: Sequence[float], steps_left: int) -> str:
    """The time the steps left should take: the median of the steps so far times their count,
    so that one step slowed by a neighbour's job (or by a held-out evaluation) does not move
    it ("-" before any step)."""
    if not step_seconds:
        return "-"
    return duration(statistics.median(step_seconds) * steps_left)


class NoSignalWatch:
    """Counts the first ``NO_SIGNAL_STEPS`` steps; ``observe`` returns the one line to print
    when every group of each of them had one reward for all its completions."""

    def __init__(self, hint: str, steps: int = NO_SIGNAL_STEPS):
        self.hint, self.steps = hint, steps
        self.seen = self.flat = 0

    @property
    def watching(self) -> bool:
        return self.seen < self.steps

    def observe(self, informative_groups: int) -> str | None:
        self.seen += 1
        self.flat += informative_groups == 0
        if self.seen == self.steps and self.flat == self.steps:
            return (f"no learning signal yet: in each of the first {self.steps} steps every "
                    "group's completions got the same reward, so their advantages are 0 and "
                    f"the model is not yet getting any signal on this task; try {self.hint}")
        return None
