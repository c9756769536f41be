"""``python -m envs``: list envs and packs, validate a pack folder, show sample tasks, print
verifier report cards, serve an env over OpenEnv."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m envs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _list_and_check_flags(commands)
    _card_flags(commands)
    _serve_flags(commands)
    return parser


def _list_and_check_flags(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("list", help="every registered env id and every pack")
    listing.add_argument("--all", action="store_true", dest="show_all",
                         help="also the reasoning-gym tasks whose report card fails")
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


def _card_flags(commands: argparse._SubParsersAction) -> None:
    card = commands.add_parser("card", help="verifier report card of each of an env's packs; "
                                            "exit 1 when a check fails")
    card.add_argument("env_id", nargs="?", metavar="ENV",
                      help="an env id (every pack that feeds it), a pack's name or a pack folder")
    card.add_argument("--pack", help="one pack of the env (default: all of them)")
    card.add_argument("--env-kwargs", metavar="JSON", help='env keywords, e.g. \'{"level": 1}\'')
    card.add_argument("--fast", action="store_true",
                      help="a small seeded sample of tasks per pack (the CI card)")
    card.add_argument("--tasks", type=int, default=None, metavar="N",
                      help="tasks per pack (default 200, 30 for sandboxed envs; with --fast 12 and 2)")
    card.add_argument("--seed", type=int, default=0, help="the task sample's seed (default 0)")
    card.add_argument("--search-budget", type=int, default=None, metavar="N",
                      help="completions the reward search grades (default 2000, a sandboxed "
                           "env 60; --fast: 64 and 4)")
    card.add_argument("--split", help="split to sample (default: test, else the first)")
    card.add_argument("--corpus", action="append", default=[], metavar="DIR",
                      help="another folder of *_hacks.jsonl / *_honest.jsonl lines (repeatable)")
    card.add_argument("--all", action="store_true", dest="all_builtin",
                      help="every built-in env and pack")
    shown = card.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", dest="as_json", help="print JSON")
    shown.add_argument("--markdown", action="store_true",
                       help="print one Markdown table row per card (the README's table)")
    shown.add_argument("--update-baseline", action="store_true",
                       help="with --all --fast: rewrite envs/tools/card/baseline.json and the "
                            "README's table")


def _serve_flags(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve an env over OpenEnv (HTTP and WebSocket; "
                                              'needs pip install -e ".[openenv]")')
    serve.add_argument("env_id", metavar="ENV", help="a registered env id, e.g. grpo/MathExact-v0")
    serve.add_argument("--pack", help="pack name (default: the env's default pack)")
    serve.add_argument("--env-kwargs", metavar="JSON", help='env keywords, e.g. \'{"level": 1}\'')
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--max-sessions", type=int, default=32, metavar="N",
                       help="concurrent WebSocket sessions (default 32)")
    serve.add_argument("--token", help="bearer token clients must send (default: "
                                       "$GRPO_GYM_SERVE_TOKEN); needed off loopback")
    serve.add_argument("--no-token", action="store_true",
                       help="allow a non-loopback bind without a token (a trusted network)")
    serve.add_argument("--max-body-bytes", type=int, default=None, metavar="N",
                       help="largest request body or WebSocket message (default 4 MiB)")
    serve.add_argument("--session-timeout", type=float, default=600.0, metavar="S",
                       help="reclaim a session idle this many seconds (default 600; 0: never)")
    serve.add_argument("--ray-address", help="grade on this Ray cluster (envs.ray_scoring)")
    serve.add_argument("--manifest-dir", metavar="DIR",
                       help="also write DIR/openenv.yaml for the served env and pack")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "card":
        if args.tasks is not None and args.tasks < 1:
            parser.error("--tasks must be at least 1")
        if args.search_budget is not None and args.search_budget < 0:
            parser.error("--search-budget must be at least 0")
        if args.update_baseline and not (args.all_builtin and args.fast):
            parser.error("--update-baseline needs --all --fast (the CI cards)")
        if args.all_builtin and (args.env_id or args.pack):
            parser.error("--all takes no ENV or --pack")
    if getattr(args, "sample", None) is not None and args.sample < 1:
        parser.error("--sample must be at least 1")

    # Imported here so `--help` stays fast and a usage error never loads every pack.
    if args.command == "list":
        from envs.tools.cli_list import print_list

        return print_list(show_all=args.show_all)
    if args.command == "validate":
        from envs.tools.cli_validate import print_validation

        return print_validation(args.paths, check_gold=not args.no_gold, sample=args.sample)
    if args.command == "card":
        from envs.tools.cli_card import print_cards

        return print_cards(args.env_id, pack=args.pack, env_kwargs=args.env_kwargs,
                           as_json=args.as_json, markdown=args.markdown, fast=args.fast,
                           all_builtin=args.all_builtin, n_tasks=args.tasks, seed=args.seed,
                           split=args.split, corpora=args.corpus,
                           search_budget=args.search_budget,
                           update_baseline=args.update_baseline)
    if args.command == "serve":
        from envs.tools.cli_serve import serve

        return serve(args.env_id, pack=args.pack, env_kwargs=args.env_kwargs, host=args.host,
                     port=args.port, max_sessions=args.max_sessions, token=args.token,
                     no_token=args.no_token, max_body_bytes=args.max_body_bytes,
                     session_timeout_s=args.session_timeout, ray_address=args.ray_address,
                     manifest_dir=args.manifest_dir)
    from envs.tools.cli_show import print_samples

    return print_samples(args.env_id, pack=args.pack, split=args.split, n=args.n,
                         options=args.option)


if __name__ == "__main__":
    sys.exit(main())
