"""The run's processes (joined by the ``Accelerator`` that ``placement`` builds), and what a step needs from the
others (one process: all of these are no-ops).

Every process runs the same step on its share of the prompts; ``Processes`` exchanges the few
numbers that must be global (counts, means, the reward std of ``--scale-rewards batch``, flags)
through accelerate's collectives.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from torch import Tensor

from learner.env_setup import SetupError
from learner.training.batching import Batch


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

    def barrier(self) -> None:
        """Wait until every process is here."""
        self.accelerator.wait_for_everyone()

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


class UnsharedOutput(SetupError):
    """A multi-process run whose processes do not share its output folder."""


SHARED_MARKER = ".grpo-gym-shared-check"


def check_shared_folder(procs: Processes, folder: str | Path) -> None:
    """Checkpoints are written by every process into one folder (accelerate's save_state:
    each process its RNG state, DeepSpeed its shards) that the main process then renames into
    place, and read back by every process on --resume: the processes must see the same
    folder. On one machine they do; across machines only on a shared filesystem. Checked at
    start, in one line, rather than at the first checkpoint; every process must call it."""
    if procs.world == 1:
        return
    marker = Path(folder) / SHARED_MARKER
    if procs.rank == 0:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("written by the main process")
    procs.barrier()
    seen = procs.gather_objects((marker.is_file(), socket.gethostname()))
    procs.barrier()
    if procs.rank == 0:
        marker.unlink(missing_ok=True)
    blind = [(r, host) for r, (ok, host) in enumerate(seen) if not ok]
    if blind:
        r, host = blind[0]
        raise UnsharedOutput(
            f"--output-dir {folder} is not shared by the run's processes (process {r} on "
            f"{host} does not see the file the main process wrote there): every process writes "
            "checkpoints into it, so a run over several machines needs it on a shared "
            "filesystem (NFS, Lustre, a cloud file share)")


def balance_by_tokens(costs: list[int], parts: int) -> list[list[int]]:
    """Indices of ``costs`` (a group's tokens each) shared among ``parts`` processes so that
    their totals are even, not their counts: the largest first, each to the process with the
    fewest tokens so far (the lowest rank on a tie; greedy LPT, within 4/3 of the best
    split), each part's indices in ascending order. Every process computes the same split
    from the same list."""
    load = [0] * parts
    share: list[list[int]] = [[] for _ in range(parts)]
    for i in sorted(range(len(costs)), key=lambda j: (-costs[j], j)):
        r = min(range(parts), key=lambda q: (load[q], q))
        share[r].append(i)
        load[r] += costs[i]
    return [sorted(s) for s in share]


def group_runs(groups: Tensor) -> list[tuple[int, int]]:
    """(start, end) of each run of equal group ids (a group's rows are contiguous)."""
    if len(groups) == 0:
        return []
    _, counts = torch.unique_consecutive(groups.cpu(), return_counts=True)
    ends = counts.cumsum(0).tolist()
    return list(zip([0, *ends[:-1]], ends, strict=True))


def balance_rows(batch: Batch, procs: Processes) -> Batch:
    """This process's share of every process's ``batch`` rows, whole groups balanced by the
    positions a loss pass runs (``Batch.positions``: completion tokens, a group's prompt once):
    sampling gives each process P / world prompts, but their completions differ in length, and
    the step waits for the process with the most tokens. The loss does not change: the rows
    are the same, the normalisers global (each process keeps its own counts, whose mean the
    update takes). A process left without a group keeps a placeholder row with no loss."""
    if procs.world == 1:
        return batch
    device = batch.prompt_ids.device
    mine = batch.to(torch.device("cpu"))
    every = procs.gather_objects(mine)  # whole groups move; rows are token ids (small)
    pieces, costs = [], []
    for b in every:
        positions = b.positions()
        for a, e in group_runs(b.groups):
            if bool(b.loss_mask[a:e].any()):  # placeholders carry nothing
                pieces.append((b, a, e))
                costs.append(int(positions[a:e].sum()))
    share = balance_by_tokens(costs, procs.world)[procs.rank]
    if not share:
        placeholder = mine.rows(0, 1)
        placeholder.loss_mask = torch.zeros_like(placeholder.loss_mask)
        return placeholder.to(device)
    return Batch.concat([pieces[i][0].rows(pieces[i][1], pieces[i][2]) for i in share],
                        batch.n_sequences, batch.n_tokens).to(device)


def cpu_threads(processes: int = 1) -> int:
    """Threads per process for CPU work when ``--num-threads`` is not given: the cores this
    process may run on, shared among the processes.

    Never the load: the thread count changes the order of fp32 sums, so a count that followed
    how busy the machine is would give one seed different runs. The trainer fixes the count at
    start and ``config.json`` records it; a resumed run reads it back.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(processes, 1))
