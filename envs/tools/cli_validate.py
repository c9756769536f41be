"""``python -m envs validate PATH|PACK``: print every problem of each pack folder and a summary,
then the summary line of the pack's fast verifier report card (``python -m envs card``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envs.tools.validate import UNBOUNDED_SAMPLE, validate_folder
from tasks.registry import pack_sources


def pack_folder(path: str) -> str:
    """``path``, or the folder of the known pack of that name when no such path exists
    (``python -m envs validate pyfunc``)."""
    if not Path(path).exists() and path in pack_sources():
        return str(pack_sources()[path].folder)
    return path


def card_line(folder: str, env_id: str) -> str:
    """The summary line of the pack's fast card; it informs and never refuses the pack (the
    card's checks measure the verifier, not the pack's form)."""
    from envs.tools.card.card import run_card
    from envs.tools.cli_card import make_env

    try:
        env = make_env(env_id, Path(folder), {})
        try:
            return run_card(env, fast=True).summary() + "; details: python -m envs card " + folder
        finally:
            env.close()
    except Exception as exc:  # noqa: BLE001 - the validation itself stands; say why
        return f"card: not computed ({type(exc).__name__}: {exc})"[:300]


def print_validation(paths: Sequence[str], *, check_gold: bool = True,
                     sample: int | None = None) -> int:
    """Returns the exit code: 1 when any folder has an error, else 0."""
    failed = False
    for path in paths:
        report = validate_folder(pack_folder(path), check_gold=check_gold,
                                 unbounded_sample=UNBOUNDED_SAMPLE if sample is None else sample)
        for problem in report.errors:
            print(f"error: {problem}")
        for problem in report.warnings:
            print(f"warning: {problem}")
        for note in report.notes:
            print(f"note: {note}")
        print(report.summary())
        if report.ok:
            print(f"pack_version: {report.pack_version}")
            if check_gold:  # the card grades golds too: not without the verifier's sandbox
                print(card_line(pack_folder(path), report.env))
        failed = failed or not report.ok
    return 1 if failed else 0
