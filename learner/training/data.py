"""The stream of training prompts: deterministic, resumable from one integer position."""

from __future__ import annotations

import numpy as np

from envs.contract import LearnerEnv
from tasks import Task


class PromptStream:
    """Tasks of ``split`` in a seeded order; ``position`` counts tasks handed out so far.

    A finite split is reshuffled every epoch; an unbounded (procedural) split is read in index
    order, offset by the seed, since its generator already randomises each index.
    """

    def __init__(self, env: LearnerEnv, split: str = "train", seed: int = 0, position: int = 0):
        self.env, self.split, self.seed, self.position = env, split, seed, position
        self.size = env.pack.size(split)
        if self.size == 0:
            raise ValueError(f"split '{split}' of pack '{env.pack.name}' is empty")
        self._epoch, self._order = -1, np.arange(0)

    def _index(self, position: int) -> int:
        if self.size is None:
            return self.seed * 1_000_003 + position
        epoch, offset = divmod(position, self.size)
        if epoch != self._epoch:
            self._epoch = epoch
            self._order = np.random.default_rng([self.seed, epoch]).permutation(self.size)
        return int(self._order[offset])

    def take(self, n: int) -> list[Task]:
        tasks = [self.env.pack.task_at(self.split, self._index(self.position + i))
                 for i in range(n)]
        self.position += n
        return tasks
