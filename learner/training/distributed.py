"""What a step needs from the other processes (one process: all of these are no-ops).

Every process runs the same step on its share of the prompts; these helpers exchange the few
numbers that must be global (counts, means, the reward std of ``--scale-rewards batch``, flags)
through accelerate's collectives.
"""

from __future__ import annotations

import os
from typing import Any

import psutil
import torch
from accelerate import Accelerator


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
