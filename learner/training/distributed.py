"""The run's processes (joined by the ``Accelerator`` that ``placement`` builds), and what a step needs from the
others (one process: all of these are no-ops).

Every process runs the same step on its share of the prompts; ``Processes`` exchanges the few
numbers that must be global (counts, means, the reward std of ``--scale-rewards batch``, flags)
through accelerate's collectives.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil
import torch
from accelerate import Accelerator


def check_accumulation(accelerator: Accelerator) -> None:
    """The trainer accumulates micro-batches itself (``--gradient-accumulation-steps``, with
    normalisers over the whole step); an Accelerator that accumulates too would divide every
    loss a second time in ``backward``."""
    if accelerator.gradient_accumulation_steps != 1:
        raise ValueError(
            f"the Accelerator accumulates gradients over {accelerator.gradient_accumulation_steps}"
            " steps; the trainer does that itself (--gradient-accumulation-steps): give it one "
            "with gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1)")


class Processes:
    """The processes of a run, seen from one of them."""

    def __init__(self, accelerator: Accelerator):
        self.accelerator = accelerator

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def world(self) -> int:
        return self.accelerator.num_processes

    def local(self, items: list) -> list:
        """This process's share of ``items`` (round-robin)."""
        return items[self.rank::self.world]

    def gather_ints(self, value: int) -> list[int]:
        """One integer from every process, in rank order (exact: no float round trip)."""
        if self.world == 1:
            return [value]
        t = torch.tensor([value], dtype=torch.long, device=self.accelerator.device)
        return [int(v) for v in self.accelerator.gather(t)]

    def mean(self, value: float) -> float:
        """A per-process number averaged over processes."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.accelerator.device)
        return float(self.accelerator.reduce(t, reduction="mean"))

    def gather_objects(self, value: Any) -> list[Any]:
        """One picklable object from every process, in rank order."""
        if self.world == 1:
            return [value]
        from accelerate.utils import gather_object

        return gather_object([value])

    def std(self, values: list[float]) -> float | None:
        """The unbiased std of every process's ``values`` together (None for fewer than two)."""
        every = torch.tensor([v for part in self.gather_objects(values) for v in part],
                             dtype=torch.float64)
        return float(every.std()) if every.numel() > 1 else None


def share_quota(available: list[int], total: int) -> list[int]:
    """Split ``total`` groups over processes that have ``available[r]`` each, round-robin.

    With ``--dynamic-sampling`` the step trains exactly ``min(total, sum(available))`` groups
    in all, however unevenly the informative groups fell on the processes.
    """
    quota = [0] * len(available)
    left = min(total, sum(available))
    while left:
        for r, have in enumerate(available):
            if left and quota[r] < have:
                quota[r] += 1
                left -= 1
    return quota


#: How long ``cpu_threads`` watches the CPUs to see how busy they are.
BUSY_SAMPLE_S = 0.3


def cpu_threads(processes: int = 1) -> int:
    """Threads per process for CPU work: the cores not already busy, shared among processes.

    Oversubscribed OpenMP threads spin against each other; on a shared machine one thread that
    runs beats two that wait, by an order of magnitude. Busy means busy now (CPU use over
    ``BUSY_SAMPLE_S``): the load average lags by a minute, so a run started right after another
    job ended took one thread of two for its whole length.
    """
    cores = os.cpu_count() or 1
    busy = psutil.cpu_percent(interval=BUSY_SAMPLE_S) / 100 * cores
    idle = cores - int(busy + 0.5)
    return max(1, min(cores, idle) // max(processes, 1))


class IdleCores:
    """The threads of a one-process CPU run, looked at again between steps.

    ``cpu_threads`` sees the CPUs for a moment at start, and a moment is easy to misread: a
    run started while the last one's containers were going away kept one thread of two for
    its whole length (twice the wall time). Between steps this counts the cores that other
    processes used since the last look (the machine's busy time less this process's own) and
    gives the run the rest. Grading containers count as others, but they run for a second or
    two of a step's minute. Not for several processes (each would count the others) or a
    separate rollout engine's process (its work is the run's own).
    """

    def __init__(self, cores: int | None = None):
        self.cores = cores or os.cpu_count() or 1
        self._ours = psutil.Process()
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float]:
        busy = psutil.cpu_times()
        ours = self._ours.cpu_times()
        # Steal time is the host's, not another process's here: it is not counted as busy.
        return (time.monotonic(), busy.user + busy.nice + busy.system + busy.irq + busy.softirq,
                ours.user + ours.system)

    def threads(self) -> int:
        """The threads to use from now on: the cores others left idle since the last call."""
        now = self._sample()
        wall, busy, ours = (b - a for a, b in zip(self._last, now, strict=True))
        self._last = now
        if wall <= 0:
            return max(1, torch.get_num_threads())
        others = max(0.0, busy - ours) / wall
        return max(1, min(self.cores, self.cores - int(others + 0.5)))
