"""``--async-steps 1``: the next step's samples, drawn on a background thread while this step
trains, by the policy as it was before this step's update (one-step off-policy).

The learner's own loop samples from a frozen copy of the policy, its weights copied in before
each draw; a vLLM engine keeps its own weights and is simply synced one step late, between two
draws (the trainer does that). Each draw remembers the policy's version (optimizer steps
taken) it was drawn with, so the update knows how stale its samples are, and the prompt
stream's position before it, which is what a checkpoint saves: a resumed run draws the
prompts of the step that was in flight again, from the resumed policy.

One process only: the draw's collectives (dynamic sampling's counts) would interleave with the
update's gradient all-reduce on another thread.

The draw samples with its own torch generators (``distribution.drawing_with``), seeded from the
run's seed, so that a seeded run repeats itself: sharing torch's global generator with the
update's dropout (LoRA's included) on the other thread, the order of their draws would be the
threads' race.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from learner.distribution import DrawGenerators, drawing_with
from learner.training.samples import StepSamples


@dataclass
class Drawn:
    """A step's samples and the policy version (optimizer steps taken) that drew them."""

    samples: StepSamples
    version: int


class DrawAhead:
    """At most one draw in flight; ``collect(model)`` is the trainer's sample-and-score."""

    def __init__(self, collect: Callable[[Any], StepSamples], seed: int | None = None):
        self._collect = collect
        # Seeded from the global seed the run set (set_seed) unless given.
        self.generators = DrawGenerators(torch.initial_seed() if seed is None else seed)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-draw-ahead")
        self._pending: Future[StepSamples] | None = None
        self._version = 0
        # The task sampler's state before the draw in flight (what a checkpoint saves).
        self.position: dict[str, Any] | None = None
        self._frozen: torch.nn.Module | None = None

    @property
    def pending(self) -> bool:
        return self._pending is not None

    def frozen_copy(self, policy: torch.nn.Module) -> torch.nn.Module:
        """``policy``'s weights now, in a copy the update does not touch (made once, then
        overwritten in place before each draw: no draw is in flight then)."""
        if self._frozen is None:
            self._frozen = copy.deepcopy(policy).eval().requires_grad_(False)
            return self._frozen
        with torch.no_grad():
            for mine, theirs in zip(self._frozen.parameters(), policy.parameters(), strict=True):
                mine.copy_(theirs)
            for buf, src in zip(self._frozen.buffers(), policy.buffers(), strict=True):
                buf.copy_(src)
        return self._frozen

    def start(self, model: Any, version: int, position: dict[str, Any]) -> None:
        """Draw the next step's samples with ``model`` (the frozen copy, or the policy when a
        synced engine samples), drawn at policy ``version``; ``position``: the task sampler's
        state before it."""
        if self._pending is not None:
            raise RuntimeError("a draw is already in flight")
        self._version, self.position = version, position
        self._pending = self._pool.submit(self._draw, model)

    def _draw(self, model: Any) -> StepSamples:
        with drawing_with(self.generators):
            return self._collect(model)

    def take(self) -> Drawn | None:
        """The draw in flight, once done (its exception, if it raised); None when none is."""
        if self._pending is None:
            return None
        future, self._pending, self.position = self._pending, None, None
        return Drawn(future.result(), self._version)

    def close(self) -> None:
        """Wait for a draw in flight (a thread cannot be stopped) and drop the copy."""
        self._pool.shutdown(wait=True)
        self._pending, self._frozen = None, None
