"""What ``GRPOTrainer.train`` does around the steps: the held-out evaluations (before, every
``--eval-every`` steps, after), metrics.jsonl / heldout.jsonl / samples.jsonl, checkpoints
(``--save-every``, ``--save-every-minutes``, the last step, a stop), the progress bar, the
one-line warnings (time estimate, no reward spread, the reward-hack monitor, lost containers,
a refused evaluation), and the decision to stop (a signal, a grading outage, too many
infrastructure failures), agreed by every process.

A step's own metrics (``Step.metrics``) are never changed here: what a step logs is a new dict,
the step's figures and the evaluation's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from accelerate import Accelerator
from torch import Tensor
from tqdm.auto import tqdm

from envs.contract import LearnerEnv
from learner.config import INFRA_WINDOW_STEPS, Config
from learner.evaluation.during_training import HeldOut
from learner.sampling.scoring import RemoteScorer, infra_reason
from learner.stage_config import CheckpointConfig, EvalConfig
from learner.training import run_notes
from learner.training.batching import Batch
from learner.training.distributed import Processes
from learner.training.hack_monitor import HackMonitor, StepFlags, StepShaping
from learner.training.plots import BackgroundPlots
from learner.training.run_log import RunLog
from learner.training.samples import StepSamples
from learner.training.stops import (
    GradingOutage,
    InfraWatch,
    Interrupted,
    OutOfMemory,
    RunStopped,
    StopSignals,
)
from learner.training.update import UpdateStats


@dataclass(frozen=True)
class Step:
    """What one training step did, as the loop and the run log read it."""

    number: int
    samples: StepSamples
    advantages: Tensor  # (B,) per sample (0 for those whose grading failed)
    batch: Batch | None  # the rows trained on; None when no process had one
    update: UpdateStats
    flags: StepFlags  # the reward-hack monitor's counts, over every process
    shaping: StepShaping
    metrics: dict[str, Any]
    infra_errors: int  # samples that failed for infrastructure, over every process

    def sample_groups(self, n: int | None) -> list[dict[str, Any]]:
        """The first ``n`` groups of this process (None: all), as ``samples.jsonl`` keeps
        them."""
        return self.samples.groups_for_log(n, self.advantages)


class LoopTrainer(Protocol):
    """What the loop uses of its trainer (``GRPOTrainer``)."""

    config: Config
    evaluation: EvalConfig  # when to evaluate
    checkpoints: CheckpointConfig  # when to save
    accelerator: Accelerator
    procs: Processes
    env: LearnerEnv
    scorer: RemoteScorer | None
    infra_watch: InfraWatch
    step: int  # steps done
    saved_step: int | None  # the step of the last checkpoint this run wrote or resumed from
    save_at_end: bool

    def train_step(self) -> Step: ...

    def evaluate(self) -> HeldOut: ...

    def save(self) -> None: ...


class TrainLoop:
    """One ``train()`` of ``trainer``, from its current step to ``config.steps``."""

    def __init__(self, trainer: LoopTrainer):
        self.t = trainer
        self.c = trainer.config
        self.e, self.k = trainer.evaluation, trainer.checkpoints
        self.main = trainer.accelerator.is_main_process
        self.log: RunLog | None = None
        self.monitor = HackMonitor()
        self.infra_warned = False
        self.last_save = time.monotonic()
        self.samples_thinned = False  # samples.jsonl passed --samples-max-mb
        self.plots: BackgroundPlots | None = None

    def run(self, resumed: bool) -> dict[str, Any]:
        """Held-out metrics before (if run) and after, the last step's metrics and the
        reward-hack monitor's total; raises ``RunStopped`` with a checkpoint saved."""
        t, c = self.t, self.c
        if self.main:
            print(run_notes.plan_line(c, t.env, t.step), flush=True)
            self.log = RunLog(c.output_dir, resume_step=t.step if resumed else None)
            self.plots = BackgroundPlots(c.output_dir) if c.plot_every else None
        result: dict[str, Any] = {"resumed_from": t.step if resumed else None}
        with StopSignals() as signals:
            try:
                if self.e.eval and not resumed:
                    before = t.evaluate()
                    result["before"] = before.metrics
                    self.say_if_refused(0, before)
                    if self.log:
                        self.log.log(0, before.metrics)
                        self.log.heldout(0, before.records)
                result.update(self.steps(signals))
            except OutOfMemory:
                # The steps done are kept: the weights and optimizer are as the last
                # finished step left them (a loss pass that failed stepped nothing). With
                # several processes the others are inside the step, not at the save's
                # collectives: the launch ends (``launch``) and the last checkpoint stays.
                if t.saved_step != t.step and t.procs.world == 1:
                    t.save()
                raise
            finally:
                if self.log:
                    self.log.close()
                if self.plots is not None:
                    self.plots.close()
        return result

    def steps(self, signals: StopSignals) -> dict[str, Any]:
        t, c = self.t, self.c
        result: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        bar = tqdm(total=c.steps, initial=t.step, disable=not (self.main and c.progress),
                   desc="grpo", dynamic_ncols=True, bar_format=run_notes.BAR_FORMAT)
        watch = run_notes.NoSignalWatch(t.env.no_signal_hint())
        first = True
        step_seconds: list[float] = []  # the steps since this start: the ETA is their median
        try:
            while t.step < c.steps:
                self.stop_if_asked(signals)
                t0 = time.perf_counter()
                step = t.train_step()
                step_seconds.append(time.perf_counter() - t0)
                stop = self.stop_after(step, signals)
                if self.main and first:
                    first = False
                    tqdm.write(run_notes.estimate_line(time.perf_counter() - t0,
                                                       c.steps - t.step, self.e.eval))
                self.warn(step, watch, stop)
                # A stopping run evaluates nothing more.
                evaluated = self.evaluation_due(result) if stop is None else None
                if evaluated is not None:
                    self.say_if_refused(t.step, evaluated)
                metrics = {**step.metrics, **(evaluated.metrics if evaluated else {})}
                self.record(step, metrics, evaluated)
                if stop is not None:
                    t.save()
                    raise stop
                self.save_if_due()
                shown = {"step": t.step, **progress(metrics)}
                bar.set_postfix_str(  # the ETA first (set_postfix would sort it in)
                    f"eta {run_notes.eta_left(step_seconds, c.steps - t.step)}, "
                    + ", ".join(f"{k}={v}" for k, v in shown.items()), refresh=False)
                bar.update(1)
        finally:
            bar.close()
        result["final_metrics"] = metrics
        result["flags"] = self.monitor.total
        return result

    def evaluation_due(self, result: dict[str, Any]) -> HeldOut | None:
        """The held-out evaluation due after this step (``--eval-every`` before the last step;
        the last step's, whose metrics are also ``result["after"]``); None when none is due."""
        t, e, steps = self.t, self.e, self.c.steps
        if not e.eval:
            return None
        if t.step == steps:
            after = t.evaluate()
            result["after"] = after.metrics
            return after
        if e.eval_every and t.step % e.eval_every == 0:
            return t.evaluate()
        return None

    def warn(self, step: Step, watch: run_notes.NoSignalWatch, stop: RunStopped | None) -> None:
        t = self.t
        if watch.watching:
            # Reward spread, not ``informative`` (which may count correctness): the line says
            # that every advantage was 0.
            spread = int(step.samples.reward_spread.sum())
            line = watch.observe(sum(t.procs.gather_ints(spread)))
            if line and self.main:
                tqdm.write(line)
        for warning in (self.monitor.observe(step.number, step.flags),
                        self.monitor.observe_shaping(step.number, step.shaping)):
            if warning and self.main:
                tqdm.write(f"warning: {warning}")
        if step.infra_errors and not self.infra_warned and self.main and stop is None:
            self.infra_warned = True  # once: a sandbox that fails some samples may fail many
            tqdm.write(f"warning: {self.infra_notice(step)}")

    def record(self, step: Step, metrics: dict[str, Any], evaluated: HeldOut | None) -> None:
        t, c = self.t, self.c
        if not self.log:
            return
        self.log.log(t.step, metrics)
        if evaluated is not None:  # at this step: its held-out answers too
            self.log.heldout(t.step, evaluated.records)
        # The last step's groups too: a run shorter than K steps still leaves some.
        if c.samples_every and (t.step % c.samples_every == 0 or t.step == c.steps):
            self.log.samples(t.step, self.thinned(step.sample_groups(c.samples_groups or None)))
        if self.plots is not None and t.step % c.plot_every == 0 and t.step < c.steps:
            self.plots.start()

    def thinned(self, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The groups to write: all of them, or one in 4 once samples.jsonl has passed
        --samples-max-mb (said once)."""
        assert self.log is not None
        path, bound = self.log.samples_path, self.c.samples_max_mb * 1e6
        if not (path.is_file() and path.stat().st_size > bound):
            return groups
        if not self.samples_thinned:
            self.samples_thinned = True
            tqdm.write(f"note: samples.jsonl passed --samples-max-mb {self.c.samples_max_mb:g}: "
                       "from this step on, one group in 4 of each step is written")
        return groups[::4]

    def save_if_due(self) -> None:
        t, k, steps = self.t, self.k, self.c.steps
        if ((k.save_every and t.step % k.save_every == 0)
                or (t.step == steps and t.save_at_end)
                or (t.step < steps and self.save_due())):
            t.save()
            self.last_save = time.monotonic()

    def save_due(self) -> bool:
        """--save-every-minutes: due once that much wall time passed since the last save; rank
        0's clock decides for every process (they must save together)."""
        minutes = self.k.save_every_minutes
        if not minutes:
            return False
        due = time.monotonic() - self.last_save >= minutes * 60
        return bool(self.t.procs.gather_ints(int(due))[0])

    def stop_if_asked(self, signals: StopSignals) -> None:
        """Before a step: a signal that came meanwhile (during an evaluation, say) stops the
        run here, with a checkpoint of the steps done."""
        t = self.t
        signum = max(t.procs.gather_ints(signals.requested or 0))
        if signum:
            if t.saved_step != t.step:
                t.save()
            raise Interrupted(signum, t.step, self.c.steps)

    def stop_after(self, step: Step, signals: StopSignals) -> RunStopped | None:
        """Why the run stops after ``step`` (None: it goes on), agreed by every process: a
        signal, samples that failed because grading as a whole is down, or more than
        ``--max-infra-error-rate`` of the last steps' samples failed for infrastructure
        (``InfraWatch``). A few lost containers are not a reason: their samples are dropped
        from the update and counted in ``samples/infra_errors``."""
        t, steps = self.t, self.c.steps
        failed = step.infra_errors
        outage = grading_outage(t) if failed else None
        outages = [o for o in t.procs.gather_objects(outage) if o]
        if outages:
            return GradingOutage(outages[0], step.number, steps)
        scores = step.samples.scores
        reasons = t.procs.gather_objects(infra_reason(scores)) if failed else []
        too_many = t.infra_watch.observe(
            step.number, failed, sum(t.procs.gather_ints(len(scores.rewards))),
            next((r for r in reasons if r), None), steps)
        if too_many is not None:
            return too_many
        signum = max(t.procs.gather_ints(signals.requested or 0))
        return Interrupted(signum, step.number, steps) if signum else None

    def infra_notice(self, step: Step) -> str:
        n = len(step.samples.scores.rewards) * self.t.procs.world
        errors = step.infra_errors
        reason = infra_reason(step.samples.scores) or "on another process"
        return (f"step {step.number}: {errors} of {n} samples were not scored because the "
                f"sandbox failed ({reason}). They are dropped from the update and counted in "
                "samples/infra_errors; past --max-infra-error-rate "
                f"{self.c.max_infra_error_rate:g} of the last {INFRA_WINDOW_STEPS} steps' "
                "samples the run stops.")

    def say_if_refused(self, step: int, evaluated: HeldOut) -> None:
        """One line when the evaluation at ``step`` reported no accuracy: more than 1% of its
        samples failed for infrastructure (metrics.jsonl holds ``eval/accuracy: null``)."""
        line = evaluated.refusal()
        if self.main and line is not None:
            tqdm.write(f"warning: held-out evaluation at step {step}: {line}")


def grading_outage(t: LoopTrainer) -> str | None:
    """Why grading as a whole does not answer (one line), or None: the Ray cluster's with
    --ray-address, else the env's own infrastructure (``infra_outage``)."""
    if t.scorer is not None:
        check = getattr(t.scorer, "unreachable", None)
        return check() if check is not None else None
    return t.env.infra_outage()


def progress(metrics: dict[str, Any]) -> dict[str, str]:
    """The progress bar's figures: reward, KL ("skipped" on a step without an update), the
    flagged share of credited samples, the peak memory (when step_metrics logs it), grading's
    p99 per sample (and how many samples hit a time limit, when any did: a slow verifier shows
    before it stalls the run)."""
    flagged, kl = metrics.get("flags/credited_frac"), metrics.get("kl")
    out = {"reward": f"{metrics['reward/mean']:.3f}",
           "kl": "skipped" if metrics.get("skipped") else "-" if kl is None else f"{kl:.4f}",
           "flagged": "-" if flagged is None else f"{flagged:.0%}"}
    if (rss := metrics.get("memory/peak_rss_gb")) is not None:
        out["mem"] = f"{rss:.1f}G"
    if (p99 := metrics.get("time/grade_p99_s")) is not None:
        timeouts = metrics.get("samples/grade_timeouts") or 0
        out["grade_p99"] = f"{p99:.2f}s" + (f" ({timeouts} timed out)" if timeouts else "")
    return out
