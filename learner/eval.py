"""``python -m learner.eval``: evaluation gates for a policy, before and after training.

    python -m learner.eval --env ENV_ID [--env-kwargs JSON] [--model PATH_OR_HF_ID | --run DIR]
        --limit N --samples-per-task K [--pass-k 1,2,K] --max-new-tokens T --output-dir OUT

The flags it shares with ``python -m learner.run`` (env, model, sampling, tokens, turns,
grading, CPU kernel) are built from the same field definitions (``learner.config.Config``), so
their types, choices and help agree; ``SHARED`` says where learner.eval defaults differently.
    python -m learner.eval --compare OUT_A OUT_B
    python -m learner.evaluation compare OUT_A OUT_B   (paired difference of eval.json's)

Without ``--model`` the embedded default model is evaluated. With ``--run DIR`` the latest
checkpoint of that training run is evaluated next to the model the run started from, and the
report carries both and their deltas. Output: ``OUT/report.json``, ``OUT/report.html`` (plots in
``OUT/plots``), every graded completion in ``OUT/samples.jsonl``, and ``OUT/eval.json``, the
result in the field's shape (success rate +- standard error, pass@k for each ``--pass-k``,
error rate, per-task rows; ``learner.evaluation.result_shape``; with ``--run`` also
``OUT/eval_start.json`` for the starting model).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

# Only light modules at import time: --help and flag errors answer before torch loads, as
# learner.run's do; the evaluation itself is learner.evaluation.command.
from learner.config import (
    Config,
    ConfigError,
    OneLineErrors,
    field_default,
    flag_kwargs,
    ray_address_problems,
)

#: The flags learner.eval shares with learner.run: their help, type and choices come from
#: ``learner.config.Config``'s field definitions (one flag system), each with learner.eval's
#: default and, where it differs from learner.run's, what that default means here.
SHARED: dict[str, tuple[object, str | None]] = {
    "env": (None, "default with --run: the run's"),
    "env_kwargs": ({}, "with --run: applied on top of the run's own"),
    "model": (None, None),
    "max_new_tokens": (None, "per turn on a multi-turn env; default: the run's with --run, "
                             f"else learner.run's {field_default('max_new_tokens')}"),
    "max_turns": (0, "0 here: the run's, else the env's default"),
    "max_episode_tokens": (None, "default: the run's, else none beyond the turn limit"),
    "tool_role": (None, "default: the run's, else auto"),
    "temperature": (field_default("temperature"), None),
    "top_p": (field_default("top_p"), None),
    "seed": (field_default("seed"), None),
    "ray_address": (None, None),
    "cpu_matmul": (field_default("cpu_matmul"), None),
    "device": (field_default("device"), None),
}


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


def _pass_ks(text: str) -> list[int]:
    """argparse type of --pass-k: ``1,4,8`` -> [1, 4, 8]."""
    from learner.evaluation.result_shape import parse_ks  # torch-free

    try:
        return parse_ks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shared(parser: argparse._ActionsContainer, name: str) -> None:
    default, note = SHARED[name]
    kwargs = flag_kwargs(name)
    if note:
        kwargs["help"] += f" ({note})"
    elif "default:" not in kwargs["help"]:
        kwargs["help"] += f" (default: {default!r})"
    parser.add_argument("--" + name.replace("_", "-"), dest=name, default=default, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrors(
        prog="python -m learner.eval",
        description="Evaluation gates: held-out accuracy, pass@k, reward and group-variance "
                    "distributions, prompt perturbations, flagged samples, a general check.")
    p.add_argument("--compare", nargs=2, metavar=("OUT_A", "OUT_B"),
                   help="print the key figures of two reports side by side, then exit")
    _shared(p, "env")
    _shared(p, "env_kwargs")
    who = p.add_mutually_exclusive_group()
    _shared(who, "model")
    who.add_argument("--run", help="a training run's output dir: evaluate its latest checkpoint "
                                   "and the model it started from")
    p.add_argument("--limit", type=_non_negative, default=50,
                   help="held-out tasks to evaluate (0 = the whole test split; default 50)")
    p.add_argument("--samples-per-task", "--group-size", dest="group_size", type=_positive,
                   default=4, help="n: samples per task for pass@k, eval.json's success rate "
                   "and the reward statistics (default 4)")
    p.add_argument("--pass-k", type=_pass_ks, default=None, metavar="K[,K...]",
                   help="the k of eval.json's unbiased pass@k, e.g. 1,4,8; each at most "
                        "--samples-per-task (default: 1 and --samples-per-task)")
    for name in ("max_new_tokens", "max_turns", "max_episode_tokens", "tool_role"):
        _shared(p, name)
    p.add_argument("--output-dir", default="runs/eval", help="default runs/eval")
    for name in ("temperature", "top_p", "seed"):
        _shared(p, name)
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
    _shared(p, "ray_address")
    p.add_argument("--num-threads", type=_non_negative, default=0,
                   help="torch CPU threads (0 = torch's default)")
    _shared(p, "cpu_matmul")
    _shared(p, "device")
    return p


def shared_problems(args: argparse.Namespace) -> list[str]:
    """The shared flags checked as learner.run checks them (``Config.validate``'s lines)."""
    given = {name: getattr(args, name) for name in SHARED
             if getattr(args, name) is not None and name != "env"}
    try:
        Config(**given).validate()
    except ConfigError as exc:
        return [str(exc)]
    except TypeError as exc:  # a value of the wrong kind
        return [str(exc)]
    return []


def resolve_max_new_tokens(args: argparse.Namespace) -> int:
    """--max-new-tokens: as given, else the run's (its config.json), else learner.run's."""
    if args.max_new_tokens is not None:
        return args.max_new_tokens
    if args.run:
        try:
            record = json.loads((Path(args.run) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}  # not a run: the evaluation says so in one line
        if isinstance(record, dict) and isinstance(record.get("max_new_tokens"), int):
            return record["max_new_tokens"]
    return field_default("max_new_tokens")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        return _compare(*args.compare)
    if problems := shared_problems(args):
        parser.error("; ".join(problems))
    from learner.evaluation.result_shape import k_problem

    if args.pass_k and (problem := k_problem(args.pass_k, args.group_size)):
        parser.error(problem)
    if args.ray_address is not None and (problems := ray_address_problems(args.ray_address)):
        parser.error("; ".join(problems))
    args.max_new_tokens = resolve_max_new_tokens(args)
    from learner.evaluation.command import ERRORS, evaluate_command  # torch, transformers
    from learner.evaluation.report import headline, load_report
    from learner.training.placement import moved, run_device

    try:
        # The one place a device is decided, as for learner.run (auto: accelerate's choice);
        # a device this machine lacks is one line.
        device = run_device(args.device).device
        path = evaluate_command(args, device, lambda model: moved(model, device))
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
    from learner.evaluation.result_shape import RESULT_JSON, load_result, summary_line

    print(f"result: {path.parent / RESULT_JSON}: "
          f"{summary_line(load_result(path.parent / RESULT_JSON))}")
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
