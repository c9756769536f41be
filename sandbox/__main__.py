"""Command line: ``python -m sandbox image build`` and ``python -m sandbox doctor``."""

from __future__ import annotations

import argparse
import sys

from sandbox.doctor import diagnose


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    image = sub.add_parser("image", help="manage the sandbox image")
    image_sub = image.add_subparsers(dest="action", required=True)
    image_sub.add_parser("build", help="build the image if its recipe changed (offline-capable)")
    image_sub.add_parser("tag", help="print the image tag in use")
    sub.add_parser("doctor", help="explain what is missing and how to fix it; list the warm "
                   "pools on the engine (per process and set of limits)")
    args = parser.parse_args(argv)

    if args.command == "doctor":
        ok = True
        for passed, message in diagnose():
            print(("ok    " if passed else "FIX   ") + message)
            ok = ok and passed
        return 0 if ok else 1
    from sandbox.image import ImageError, configured_image, ensure_image
    from sandbox.runner import SandboxUnavailable, connect

    if args.action == "tag":
        print(configured_image())
        return 0
    try:
        tag = ensure_image(connect())
    except (SandboxUnavailable, ImageError) as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
