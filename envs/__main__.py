"""``python -m envs``: list envs and packs, validate a pack folder, show sample tasks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every registered env id and every pack")
    check = commands.add_parser("validate", help="check pack folder(s); exit 1 on any error")
    check.add_argument("paths", nargs="+", metavar="PATH", help="a folder holding pack.toml, or a known pack's name")
    check.add_argument("--no-gold", action="store_true",
                       help="skip grading the gold answers (e.g. code packs without a sandbox)")
    check.add_argument("--sample", type=int, default=None, metavar="N",
                       help="tasks to check from an unbounded procedural split (default 1000)")
    show = commands.add_parser("show", help="print sample prompts and golds of an env's pack")
    show.add_argument("env_id", help="e.g. grpo/MathExact-v0, or a pack's name (its env)")
    show.add_argument("--pack", help="pack name (default: the env's default pack)")
    show.add_argument("--split", default="train")
    show.add_argument("--n", type=int, default=3, help="number of tasks (default 3)")
    show.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                      help="a procedural pack option, e.g. level=1 (repeatable)")
    args = parser.parse_args(argv)
    if getattr(args, "sample", None) is not None and args.sample < 1:
        parser.error("--sample must be at least 1")

    # Imported here so `--help` stays fast and a usage error never loads every pack.
    if args.command == "list":
        from envs.cli_list import print_list

        return print_list()
    if args.command == "validate":
        from envs.cli_validate import print_validation

        return print_validation(args.paths, check_gold=not args.no_gold, sample=args.sample)
    from envs.cli_show import print_samples

    return print_samples(args.env_id, pack=args.pack, split=args.split, n=args.n,
                         options=args.option)


if __name__ == "__main__":
    sys.exit(main())
