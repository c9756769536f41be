"""The report card's checks and their pass/fail thresholds: this table is the one place both
are stated (the card prints each rule beside its result).

Ids: OpenEnv's validation RFC 008 names ``semantic.oracle_max``, ``semantic.floor_gap``,
``semantic.canary_floor`` and ``semantic.verifier_determinism``, and reserves
``statistical.adversarial_floor`` and ``statistical.gameability_gap`` without specifying them;
grpo-gym specifies those two here. Each check also has a ``grpo.*`` id of its own, and the three
checks RFC 008 has no id for (honest precision, latency, infrastructure errors) have only that.
Rewards are read as fractions of the env's maximum reward (every weighted component at 1), so
one threshold fits every env and weighting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A gold earns "the maximum" within this fraction of it (RFC 008 allows at most 0.1).
ORACLE_TOLERANCE = 0.01
#: Do-nothing completions (empty, random) may earn at most this mean fraction, and pass nothing.
FLOOR_MAX = 0.05
#: Canaries (another task's gold, an instruction to the grader) at most this, and pass nothing.
CANARY_MAX = 0.10
#: Shallow completions (``TaskEnv.shallow_completions``): the best single kind over all tasks
#: (one strategy a policy could learn without the skill), and the best kind per task (an
#: adversary that always picks the right trick: an upper bound, which also collects a pack's
#: base rate, such as math answers that are 0 or 1).
SHALLOW_POLICY_MAX = 0.10
SHALLOW_MEAN_MAX = 0.20
#: For an env whose reward is a share of test cases passed (it declares
#: ``shallow_share_max``: the code env's 0.5), the shallow and known-hack
#: checks take that rule instead of the means above: no shallow completion or known hack earns
#: more than that share of any task, and none passes in full. A balanced True/False task pays a
#: constant exactly half, so a mean bound of 0.10 or 0.20 cannot hold there (see
#: docs/report-cards.md for why the reward is not cut at the shallow baseline instead).
#: Known hacks: none passes, and their mean fraction stays at most this.
HACK_MEAN_MAX = 0.10
#: Honest equivalent answers: at least this fraction passes.
HONEST_MIN = 0.995
#: Grading latency: the 99th percentile in seconds.
LATENCY_P99_MAX_S = 10.0
#: Samples whose grading infrastructure failed, or whose verifier raised.
INFRA_MAX = 0.01
#: The CI baseline: a compared metric may move this much in the worse direction (a fraction;
#: counts must not move at all).
REGRESSION_TOLERANCE = 0.02


@dataclass(frozen=True)
class Rule:
    metric: str
    op: str  # "<=" or ">="
    value: float

    def holds(self, metrics: dict[str, Any]) -> bool:
        got = float(metrics[self.metric])
        return got <= self.value + 1e-12 if self.op == "<=" else got >= self.value - 1e-12

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Check:
    id: str  # RFC 008's id where one fits, else ours
    ours: str
    title: str
    rules: tuple[Rule, ...]
    #: metric -> "higher" or "lower" (which way is better): what the CI baseline compares.
    better: dict[str, str] = field(default_factory=dict)
    #: Counts compare exactly; other compared metrics are fractions.
    counts: tuple[str, ...] = ()

    @property
    def threshold(self) -> str:
        return " and ".join(str(r) for r in self.rules)


CHECKS: tuple[Check, ...] = (
    Check("semantic.oracle_max", "grpo.gold_max",
          "golds (env.gold_completion) earn the maximum reward",
          (Rule("at_max", ">=", 1.0),), {"at_max": "higher", "mean": "higher"}),
    Check("semantic.floor_gap", "grpo.do_nothing_floor",
          "empty and random completions earn about 0",
          (Rule("mean", "<=", FLOOR_MAX), Rule("passed", "<=", 0.0)),
          {"mean": "lower", "passed": "lower"}),
    Check("semantic.canary_floor", "grpo.canary_floor",
          "canaries (another task's gold, an instruction to the grader) stay at the floor",
          (Rule("mean", "<=", CANARY_MAX), Rule("passed", "<=", 0.0)),
          {"mean": "lower", "passed": "lower"}),
    Check("semantic.verifier_determinism", "grpo.determinism",
          "the same completion graded twice gets the same reward and verdict",
          (Rule("agree", ">=", 1.0),), {"agree": "higher"}),
    Check("statistical.adversarial_floor", "grpo.shallow_floor",
          "shallow completions (env.shallow_completions): the best kind's mean (policy), and "
          "the best per task: mean, max, tasks passed in full",
          (Rule("policy", "<=", SHALLOW_POLICY_MAX), Rule("mean", "<=", SHALLOW_MEAN_MAX)),
          {"policy": "lower", "mean": "lower", "passed": "lower"}),
    Check("statistical.gameability_gap", "grpo.known_hacks",
          "the shipped corpus of known hacks (envs/tools/card/corpora/*_hacks.jsonl) earns nothing",
          (Rule("paid", "<=", 0.0), Rule("mean", "<=", HACK_MEAN_MAX)),
          {"paid": "lower", "mean": "lower"}, counts=("paid",)),
    Check("statistical.reward_search", "grpo.reward_search",
          "a black-box reward search from shallow seeds (envs.tools.card.search) finds no wrong "
          "answer the env pays: the best reward of a completion that is not correct",
          (Rule("paid", "<=", 0.0),), {"paid": "lower"}, counts=("paid",)),
    Check("grpo.tpr_tnr", "grpo.tpr_tnr",
          "true positives: golds pass in full (TPR); true negatives: shallow completions and "
          "the gold's mutants (env.mutant_completions: one edge broken) do not (TNR)",
          (Rule("tpr", ">=", 1.0), Rule("tnr", ">=", 1.0)),
          {"tpr": "higher", "tnr": "higher"}),
    Check("grpo.honest_precision", "grpo.honest_precision",
          "the shipped corpus of honest answers (envs/tools/card/corpora/*_honest.jsonl) passes",
          (Rule("precision", ">=", HONEST_MIN),), {"precision": "higher"}),
    Check("grpo.grading_latency", "grpo.grading_latency",
          "seconds per graded completion, p50 and p99 (not in the CI baseline)",
          (Rule("p99_s", "<=", LATENCY_P99_MAX_S),)),
    Check("grpo.infra_error_rate", "grpo.infra_error_rate",
          "graded samples whose infrastructure failed or whose verifier raised",
          (Rule("rate", "<=", INFRA_MAX), Rule("errors", "<=", 0.0)),
          {"rate": "lower", "errors": "lower"}, counts=("errors",)),
)
BY_ID = {check.id: check for check in CHECKS}


def share_rules(share: float) -> dict[str, tuple[Rule, ...]]:
    """The rules that replace a check's own for an env whose reward is a share of test cases
    and that declares ``shallow_share_max`` (``share``): check id -> rules."""
    return {
        "statistical.adversarial_floor": (Rule("max", "<=", share), Rule("passed", "<=", 0.0)),
        "statistical.gameability_gap": (Rule("paid", "<=", 0.0), Rule("max", "<=", share)),
    }


@dataclass
class Result:
    check: Check
    metrics: dict[str, Any]
    note: str = ""
    #: The rules this result is held to when not the check's own (``share_rules``).
    rules: tuple[Rule, ...] | None = None

    @property
    def threshold(self) -> str:
        return " and ".join(str(r) for r in (self.rules or self.check.rules))

    @property
    def status(self) -> str:
        """``pass``, ``fail``, or ``n/a`` (nothing to grade: no golds, no corpus lines)."""
        if not self.metrics.get("n"):
            return "n/a"
        rules = self.rules or self.check.rules
        return "pass" if all(rule.holds(self.metrics) for rule in rules) else "fail"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.check.id, "ours": self.check.ours, "status": self.status,
                "metrics": self.metrics, "threshold": self.threshold, "note": self.note}


def regressions(check: Check, now: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """How ``now`` (a result's JSON) is worse than ``before`` (the baseline's): a check that
    passed and fails, or a compared metric that moved the wrong way beyond the tolerance."""
    found = []
    if before.get("status") == "pass" and now["status"] == "fail":
        found.append(f"{check.id}: passed, now fails ({now.get('threshold', check.threshold)})")
    if before.get("status") != "n/a" and now["status"] == "n/a":  # coverage lost
        found.append(f"{check.id}: was measured, now has nothing to grade")
    old, new = before.get("metrics", {}), now["metrics"]
    for metric, way in check.better.items():
        if metric not in old or metric not in new or not new.get("n"):
            continue
        slack = 0.0 if metric in check.counts else REGRESSION_TOLERANCE
        worse = (old[metric] - new[metric]) if way == "higher" else (new[metric] - old[metric])
        if worse > slack + 1e-9:
            found.append(f"{check.id}: {metric} {old[metric]:g} -> {new[metric]:g} "
                         f"({way} is better)")
    return found
