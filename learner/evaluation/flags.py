"""Flagged samples: the high-reward ones the env's ``flag`` hook says a person should read.

The heuristics themselves live with the envs (``TaskEnv.flag``; generic ones in ``envs.flags``),
so the learner knows no domain: it only picks the samples to check and collects the reasons.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from envs.contract import LearnerEnv


def flag_samples(samples: Iterable[Mapping[str, Any]], env: LearnerEnv, *,
                 min_reward: float) -> list[dict[str, Any]]:
    """The samples with ``reward >= min_reward`` that ``env.flag`` flags, with their reasons.

    A sample is a mapping with ``task_id``, ``completion``, ``reward`` and optionally
    ``truncated``; the flagged copy adds ``flags`` (reason + detail).
    """
    samples = list(samples)
    typical = statistics.median(len(s["completion"]) for s in samples) if samples else None
    out = []
    for sample in samples:
        if sample["reward"] < min_reward:
            continue
        flags = env.flag(sample["task_id"], sample["completion"],
                         truncated=bool(sample.get("truncated")), typical_chars=typical)
        if flags:
            out.append({**sample, "flags": [f.as_dict() for f in flags]})
    return out
