"""Verifier report cards (``python -m envs card``): how far an env's rewards can be trusted.

One card per env and pack, graded on a seeded sample of its held-out tasks through the env's
own hooks: golds earn the maximum, do-nothing and canary completions earn nothing, grading is
deterministic, the best shallow completion (``TaskEnv.shallow_completions``) and the shipped
corpus of known hacks earn little, honest answers are credited, latency and infrastructure
errors; and a black-box reward search (``envs.tools.card.search``) finds no wrong answer
(``envs.tools.card.reference``) that the env pays. The checks and their thresholds are in
``envs.tools.card.checks``.
"""

from envs.tools.card.card import Card, run_card, sample_tasks
from envs.tools.card.checks import CHECKS, Check, Result

__all__ = ["CHECKS", "Card", "Check", "Result", "run_card", "sample_tasks"]
