"""The run's processes (joined by the ``Accelerator`` that ``placement`` builds), and what a step needs from the
others (one process: all of these are no-ops).

Every process runs the same step on its share of the prompts; ``Processes`` exchanges the few
numbers that must be global (counts, means, the reward std of ``--scale-rewards batch``, flags)
through accelerate's collectives.
"""

from __future__ import annotations

import os
from typing import Any

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


def cpu_threads(processes: int = 1) -> int:
    """Threads per process for CPU work when ``--num-threads`` is not given: the cores this
    process may run on, shared among the processes.

    Never the load: the thread count changes the order of fp32 sums, so a count that followed
    how busy the machine was gave one seed different runs (a design-card run went 1 -> 2 -> 1
    threads and ended 67.5% where another ended 85.0%). The trainer fixes the count at start
    and ``config.json`` records it; a resumed run reads it back.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(processes, 1))
