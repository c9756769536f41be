"""Verifiers for the built-in domains: ``math`` (symbolic answers) and ``json`` (schema gate).

The code runner lives in the top-level ``sandbox`` package.
"""

from envs.verify.verdict import Verdict

__all__ = ["Verdict"]
