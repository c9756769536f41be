"""Why a run stops before its last step, and the signals that ask it to.

``StopSignals`` turns the first SIGINT or SIGTERM into a request that the loop honours between
steps (the step finishes, a checkpoint is saved, one line says how to resume); a second one
exits at once. ``RunStopped`` is what the loop raises then, or when grading cannot go on
(``GradingOutage``); the command line prints its message and exits with ``exit_code``.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunStopped(Exception):
    """The run stopped after ``step`` with a checkpoint saved; ``str()`` says why."""

    exit_code = 1

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


class Interrupted(RunStopped):
    """A SIGINT or SIGTERM: exit status 128 + the signal's number (130, 143), as a shell's."""

    def __init__(self, signum: int, step: int, total: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name} after step {step} of "
                         f"{total}; checkpoint saved", step)


class GradingOutage(RunStopped):
    """The grading infrastructure as a whole does not answer (an engine or cluster that is
    down): every further sample would fail, so training on would learn nothing."""

    def __init__(self, reason: str, step: int, total: int):
        self.reason = reason
        super().__init__(f"grading stopped at step {step} of {total}: {reason}; checkpoint "
                         "saved", step)


class StopSignals:
    """While entered (in the main thread): the first SIGINT/SIGTERM sets ``requested`` to its
    number and says what happens next; a second exits at once (``SystemExit``, so exit hooks
    such as the sandbox's container cleanup still run). The earlier handlers come back on
    exit. Elsewhere than the main thread it does nothing (Python allows handlers there only)."""

    def __init__(self) -> None:
        self.requested: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested is not None:
            _say(f"{name} again: exiting now without a checkpoint (the last saved one stays)")
            raise SystemExit(128 + signum)
        self.requested = signum
        _say(f"{name}: finishing this step, then saving a checkpoint (press Ctrl-C again to "
             "exit at once)")


def _say(line: str) -> None:
    # os.write, not print: a handler may run in the middle of a print to the same stream.
    os.write(2, (line + "\n").encode())
