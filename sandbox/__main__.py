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
    doctor = sub.add_parser("doctor", help="explain what is missing and how to fix it; list the "
                            "warm pools on the engine (per process and set of limits)")
    doctor.add_argument("--ray-address", help="check every node of this Ray cluster instead")
    args = parser.parse_args(argv)

    if args.command == "doctor":
        ok = True
        checks = diagnose() if args.ray_address is None else _cluster_checks(args.ray_address)
        for passed, message in checks:
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


def _cluster_checks(address: str) -> list[tuple[bool, str]]:
    from sandbox.ray_address import check_address

    try:
        check_address(address)
        from sandbox.ray_doctor import diagnose_cluster
    except (ValueError, ImportError) as exc:
        return [(False, str(exc) if isinstance(exc, ValueError) else
                 "--ray-address needs Ray, which is not installed: pip install -e '.[ray]'")]
    try:
        return diagnose_cluster(address)
    except ConnectionError as exc:
        return [(False, str(exc))]


if __name__ == "__main__":
    sys.exit(main())
