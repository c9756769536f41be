"""``python -m learner.evaluation compare RUN_A RUN_B``: the difference in success rate of two
evaluation results (``eval.json``, or the folders holding one), paired by task id, with its
standard error, z value and whether it is significant at 95% (``learner.evaluation.compare``).
Torch-free: it answers in well under a second."""

from __future__ import annotations

import sys

from learner.config import OneLineErrors
from learner.evaluation.compare import compare_lines
from learner.evaluation.result_shape import ResultError


def build_parser() -> OneLineErrors:
    parser = OneLineErrors(prog="python -m learner.evaluation",
                           description="Evaluation results in the field's shape (eval.json).")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="B - A in success rate, paired by task, with its "
                         "standard error and whether it is significant at 95%%")
    cmp.add_argument("run_a", metavar="RUN_A", help="eval.json, or the folder holding it")
    cmp.add_argument("run_b", metavar="RUN_B", help="eval.json, or the folder holding it")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lines = compare_lines(args.run_a, args.run_b)
    except ResultError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
