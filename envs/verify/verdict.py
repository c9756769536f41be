"""The verdict type shared by every verifier (math, JSON, code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """Outcome of grading one completion.

    ``passed`` is the binary decision, ``score`` a value in [0, 1] (equal to
    ``float(passed)`` for all-or-nothing verifiers), ``reason`` a short
    machine-friendly explanation ("equal", "not_equal", "timeout",
    "unparseable", "no_answer", ...), ``extracted`` what the verifier pulled out
    of the completion, and ``details`` verifier-specific extras.
    """

    passed: bool
    score: float
    reason: str
    extracted: Any = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fail(cls, reason: str, extracted: Any = None, **details: Any) -> Verdict:
        return cls(False, 0.0, reason, extracted, dict(details))

    @classmethod
    def ok(cls, reason: str = "equal", extracted: Any = None, **details: Any) -> Verdict:
        return cls(True, 1.0, reason, extracted, dict(details))
