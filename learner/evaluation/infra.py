"""Infrastructure failures beside an accuracy: counted, never a smaller denominator.

A sample whose grading failed outside the policy (``envs.base.is_infra_error``) says nothing
about the policy. Leaving it out of an accuracy's denominator would let a policy that can turn
its own grade into such a failure escape the penalty on the answers it is unsure of and raise
its figure. So every accuracy the learner reports counts those samples as misses, gives their
number beside it, and past ``MAX_INFRA_SHARE`` of the samples reports no accuracy at all
(``None``) with one line that says why. Light on purpose: the command lines import it before
torch loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: More failed samples than this share of them and no accuracy is reported.
MAX_INFRA_SHARE = 0.01


@dataclass(frozen=True)
class InfraCount:
    """How many of ``samples`` failed for infrastructure, and what the first one said."""

    samples: int
    failures: int
    first_reason: str | None = None

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> InfraCount:
        """The count over records with ``infra_error`` (and ``infra_reason`` on failures)."""
        records = list(records)
        failed = [r for r in records if r.get("infra_error")]
        reason = next((r.get("infra_reason") for r in failed if r.get("infra_reason")), None)
        return cls(len(records), len(failed), reason)

    @property
    def refused(self) -> bool:
        """Too many failures for an accuracy to mean anything (more than 1% of samples)."""
        return self.failures > MAX_INFRA_SHARE * self.samples

    def refusal(self, what: str = "held-out accuracy") -> str | None:
        """The one line said instead of ``what`` when refused (None when it is reported)."""
        if not self.refused:
            return None
        return (f"no {what}: {self.failures} of {self.samples} samples were infrastructure "
                f"failures, more than {MAX_INFRA_SHARE:.0%} (first: "
                f"{self.first_reason or 'no reason given'})")

    def note(self) -> str:
        """What stands beside a reported accuracy: ``(2 infrastructure failures)``."""
        return f"({self.failures} infrastructure failure{'' if self.failures == 1 else 's'})"


def counted_mean(records: Iterable[Mapping[str, Any]],
                 value: Callable[[Mapping[str, Any]], float]) -> float | None:
    """The mean of ``value`` over every record, an infrastructure failure counting as 0 (a
    miss); None for no records or past ``MAX_INFRA_SHARE`` failures."""
    records = list(records)
    if not records or InfraCount.of(records).refused:
        return None
    return sum(0.0 if r.get("infra_error") else float(value(r)) for r in records) / len(records)


def accuracy_line(accuracy: float | None, count: InfraCount, *, tasks: int | None = None,
                  what: str = "held-out accuracy") -> str:
    """``held-out accuracy 62.5% on 40 tasks (0 infrastructure failures)``, or the refusal."""
    refusal = count.refusal(what)
    if refusal is not None or accuracy is None:
        return refusal or f"no {what}: nothing was evaluated"
    return f"{what} {accuracy:.1%} on {tasks if tasks is not None else count.samples} tasks " \
           f"{count.note()}"
