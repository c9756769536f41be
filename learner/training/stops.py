"""Why a run stops before its last step, and the signals that ask it to.

``StopSignals`` turns the first SIGINT or SIGTERM into a request that the loop honours between
steps (the step finishes, a checkpoint is saved, one line says how to resume); a second one
exits at once. ``RunStopped`` is what the loop raises then, or when grading cannot go on
(``GradingOutage``), or when too many samples of the last steps failed for infrastructure
(``InfraErrors``, watched by ``InfraWatch``); the command line prints its message and exits
with ``exit_code``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
from collections.abc import Iterator
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


class InfraErrors(RunStopped):
    """Too many samples of the last steps failed for infrastructure while the engine still
    answers (lost containers, say): training on would learn from a shrinking, skewed batch."""

    def __init__(self, failures: int, samples: int, steps: tuple[int, int], max_rate: float,
                 reason: str | None, total: int):
        self.failures, self.samples = failures, samples
        first, last = steps
        span = f"step {last}" if first == last else f"steps {first}-{last}"
        super().__init__(
            f"grading failed for infrastructure on {failures} of {samples} samples in {span} "
            f"({failures / samples:.1%}, more than --max-infra-error-rate {max_rate:g}; first: "
            f"{reason or 'no reason given'}): stopped after step {last} of {total} rather than "
            "train on the rest; checkpoint saved", last)


class OutOfMemory(RunStopped):
    """The device ran out of memory (CUDA's ``OutOfMemoryError``) while the run was
    ``doing`` something; ``flag`` is what lowers that phase's memory. The steps done are kept
    in a checkpoint, and one line says so, never a traceback."""

    def __init__(self, doing: str, flag: str, step: int, total: int):
        self.doing, self.flag = doing, flag
        self.total = total
        super().__init__(f"out of memory while {doing} after step {step} of {total}; "
                         f"checkpoint saved: lower the memory with {flag}", step)

    def alone(self) -> str:
        """The line for one process of several, which saves nothing (see ``loop``)."""
        return (f"out of memory while {self.doing} after step {self.step} of {self.total}: "
                f"lower the memory with {self.flag}")


@contextlib.contextmanager
def out_of_memory_as(doing: str, flag: str, step: int, total: int) -> Iterator[None]:
    """Within this block, the device's out-of-memory error becomes ``OutOfMemory``: raised
    once the failed computation's frames (and their tensors) are released, with the cached
    blocks handed back, so that the checkpoint that follows has memory to be written with."""
    import torch

    try:
        yield
        return
    except torch.OutOfMemoryError:
        pass  # leaving the handler drops the traceback, and the tensors its frames held
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    raise OutOfMemory(doing, flag, step, total)


class InfraWatch:
    """The infrastructure failures of the last ``window`` steps (fewer at the start): past
    ``max_rate`` of their samples, ``observe`` returns the ``InfraErrors`` to stop with."""

    def __init__(self, max_rate: float, window: int = 5):
        self.max_rate, self.window = max_rate, window
        self._steps: list[tuple[int, int, int, str | None]] = []  # step, failed, samples, why

    def observe(self, step: int, failures: int, samples: int, reason: str | None,
                total: int) -> InfraErrors | None:
        """Count ``step``'s ``failures`` of ``samples`` (``reason``: its first failure's);
        ``total`` is the run's last step, for the message."""
        self._steps = [*self._steps, (step, failures, samples, reason)][-self.window:]
        failed = sum(s[1] for s in self._steps)
        seen = sum(s[2] for s in self._steps)
        if not failed or failed <= self.max_rate * seen:
            return None
        first = next((s[3] for s in self._steps if s[3]), None)
        return InfraErrors(failed, seen, (self._steps[0][0], step), self.max_rate, first, total)


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
