"""``python -m learner.eval``: evaluation gates for a policy, before and after training.

    python -m learner.eval --env ENV_ID [--env-kwargs JSON] [--model PATH_OR_HF_ID | --run DIR]
        --limit N --group-size K --max-new-tokens T --output-dir OUT
    python -m learner.eval --compare OUT_A OUT_B

Without ``--model`` the embedded default model is evaluated. With ``--run DIR`` the latest
checkpoint of that training run is evaluated next to the model the run started from, and the
report carries both and their deltas. Output: ``OUT/report.json``, ``OUT/report.html`` (plots in
``OUT/plots``) and every graded completion in ``OUT/samples.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

# Only light modules at import time: --help and flag errors answer before torch loads, as
# learner.run's do; the evaluation itself is learner.evaluation.command.
from learner.choices import CPU_MATMULS
from learner.config import OneLineErrors, parse_json_object, ray_address_problems


# -- command line ---------------------------------------------------------------------------
def _at_least(low: int) -> Callable[[str], int]:
    """argparse type: a whole number >= ``low``, with a message that says so."""

    def parse(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {low}, got {text!r}")
        return value

    return parse


_non_negative, _positive = _at_least(0), _at_least(1)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrors(
        prog="python -m learner.eval",
        description="Evaluation gates: held-out accuracy, pass@k, reward and group-variance "
                    "distributions, prompt perturbations, flagged samples, a general check.")
    p.add_argument("--compare", nargs=2, metavar=("OUT_A", "OUT_B"),
                   help="print the key figures of two reports side by side, then exit")
    p.add_argument("--env", help="gymnasium id of a grpo/* env (default with --run: the run's)")
    p.add_argument("--env-kwargs", type=parse_json_object, default={},
                   help='JSON object of env keyword arguments, e.g. \'{"pack": "arith"}\' '
                        "(with --run: applied on top of the run's own)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--model", help="local path or hub id (default: the embedded "
                                     "SmolLM2-135M-Instruct)")
    who.add_argument("--run", help="a training run's output dir: evaluate its latest checkpoint "
                                   "and the model it started from")
    p.add_argument("--limit", type=_non_negative, default=50,
                   help="held-out tasks to evaluate (0 = the whole test split; default 50)")
    p.add_argument("--group-size", type=_positive, default=4,
                   help="K: samples per task for pass@k and the reward statistics (default 4)")
    p.add_argument("--max-new-tokens", type=_positive, default=256,
                   help="default 256 (per turn on a multi-turn env)")
    p.add_argument("--max-turns", type=_non_negative, default=0,
                   help="multi-turn envs: turns per episode (0 = the run's, else the env's)")
    p.add_argument("--max-episode-tokens", type=_non_negative, default=None,
                   help="multi-turn envs: token budget of an episode (default: the run's, "
                        "else none beyond the turn limit)")
    p.add_argument("--tool-role", choices=("auto", "tool", "ipython", "user"), default=None,
                   help="multi-turn envs: chat role of tool outputs (default: the run's, "
                        "else auto)")
    p.add_argument("--output-dir", default="runs/eval", help="default runs/eval")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold")
    p.add_argument("--seed", type=int, default=0, help="seed for sampling (default 0)")
    p.add_argument("--general-limit", type=_non_negative, default=50,
                   help="ARC-Easy items for the general-capability check, scored by "
                        "log-likelihood for the policy (and, with --run, its starting model) "
                        "whatever --limit is (0 skips it; default 50)")
    p.add_argument("--flag-min-reward", type=float, default=None,
                   help="flag only samples with at least this reward (default: half the max)")
    p.add_argument("--no-perturbations", action="store_true", help="skip the perturbations")
    p.add_argument("--batch-size", type=_positive, default=8,
                   help="prompts per generate call (default 8)")
    p.add_argument("--workers", type=_positive, default=16, help="grading threads")
    p.add_argument("--ray-address", default=None,
                   help="grade on a Ray cluster: 'auto', HOST:PORT of its head or "
                        "ray://HOST:10001 (nodes with the 'docker' resource grade)")
    p.add_argument("--num-threads", type=_non_negative, default=0,
                   help="torch CPU threads (0 = torch's default)")
    p.add_argument("--cpu-matmul", choices=CPU_MATMULS, default="onednn",
                   help="CPU: the Linear layers' fp32 products through oneDNN (default) or "
                        "torch's BLAS, as learner.run's flag")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        return _compare(*args.compare)
    if args.temperature <= 0 or not 0 < args.top_p <= 1:
        parser.error("--temperature must be > 0 and --top-p in (0, 1]")
    if args.ray_address is not None and (problems := ray_address_problems(args.ray_address)):
        parser.error("; ".join(problems))
    from learner.evaluation.command import ERRORS, evaluate_command  # torch, transformers
    from learner.evaluation.report import headline, load_report

    try:
        path = evaluate_command(args)
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = load_report(path)
    print(f"report: {path} and {path.with_suffix('.html')}")
    print(headline(report))
    if report.get("baseline"):
        print(f"starting model: {headline(report['baseline'])}")
    figures = {k: v for k, v in report.items() if k in ("accuracy", "pass_at_k")}
    print(json.dumps(figures, indent=1))
    return 0


def _compare(a: str, b: str) -> int:
    """Print two reports' key figures side by side; a missing or unreadable one is one line."""
    from learner.evaluation.report import ReportError, compare_table, load_report

    try:
        reports = load_report(a), load_report(b)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(compare_table(*reports, labels=(Path(a).name or "A", Path(b).name or "B")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
