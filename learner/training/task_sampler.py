"""Which train tasks a step draws (``--sampler``): the ``TaskSampler``s of ``envs.task_sampling``.

- ``sequential``: the seeded prompt stream (``data.PromptStream``), as runs always drew;
- ``uniform``: every key the env declares (``LearnerEnv.curriculum_keys``: levels, families,
  subjects) equally often, each draw independent (on a pack without keys: the stream);
- ``curriculum``: keys weighted by their chance of a group with reward spread per token spent,
  ``(1 - p^G - (1 - p)^G + eps) / c`` (OpenEnv RFC 013), with ``p`` the key's smoothed pass
  rate, ``G`` the group size and ``c`` the mean tokens of its episodes; a share ``FLOOR`` is
  spread evenly over every key, so one never drawn or written off keeps being tried. On a pack
  without keys it weighs tasks one by one: half the draws are fresh tasks from the stream, half
  revisit tasks already seen (at most ``POOL_SIZE``), by the same weight.

The pure functions (``pass_rate``, ``key_weight``, ``key_shares``) carry the arithmetic; the
samplers own a seeded numpy generator (the run's seed), and their ``state_dict`` (JSON: the
checkpoint's ``trainer_state.json``) holds it, so ``--resume`` draws exactly what the run would
have drawn. What a key is comes from the env alone (domain knowledge stays in ``envs/``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.contract import LearnerEnv
from learner.env_setup import SetupError
from learner.training.data import PromptStream
from tasks import Task

#: The weight a key keeps when a group of it can hardly have reward spread (p near 0 or 1).
EPSILON = 0.02
#: The share of draws spread evenly over every key whatever its weight: keys never drawn, or
#: written off as solved or hopeless, are still tried (a policy moves).
FLOOR = 0.05
#: Beta prior of a key's pass counts (Jeffreys): a key never seen has p = 0.5.
PRIOR = (0.5, 0.5)
#: Each update of a key scales its older counts by this: the policy moves, its pass rates too.
DECAY = 0.8
#: Keyless curriculum: the tasks kept with their pass rates, and the share of draws that
#: revisit them (the rest are fresh tasks).
POOL_SIZE = 512
POOL_SHARE = 0.5
#: A key whose tasks the stream does not reach within this many positions has none.
SCAN_LIMIT = 100_000


def pass_rate(passes: float, trials: float, prior: tuple[float, float] = PRIOR) -> float:
    """The smoothed pass rate: the posterior mean under a Beta(``prior``) prior."""
    a, b = prior
    return (passes + a) / (trials + a + b)


def key_weight(p: float, group_size: int, cost: float, eps: float = EPSILON) -> float:
    """The chance that a group of ``group_size`` episodes with pass rate ``p`` has both a pass
    and a fail (reward spread: something to learn), plus ``eps``, per token of ``cost``."""
    if cost <= 0:
        raise ValueError(f"a key's cost must be positive tokens, got {cost}")
    return (1.0 - p ** group_size - (1.0 - p) ** group_size + eps) / cost


def key_shares(weights: Sequence[float], floor: float = FLOOR) -> list[float]:
    """The draw probability of each key: ``1 - floor`` by weight, ``floor`` evenly."""
    if not weights:
        raise ValueError("no keys to share draws between")
    total, k = float(sum(weights)), len(weights)
    if total <= 0:
        return [1.0 / k] * k
    return [(1.0 - floor) * w / total + floor / k for w in weights]


@dataclass
class KeyStats:
    """A key's decayed counts: passes and trials (episodes graded), tokens and episodes."""

    passes: float = 0.0
    trials: float = 0.0
    tokens: float = 0.0

    def observe(self, passes: float, trials: float, tokens: float, decay: float = DECAY) -> None:
        self.passes = decay * self.passes + passes
        self.trials = decay * self.trials + trials
        self.tokens = decay * self.tokens + tokens

    @property
    def pass_rate(self) -> float:
        return pass_rate(self.passes, self.trials)

    @property
    def cost(self) -> float | None:
        """Mean tokens per episode; None before any."""
        return self.tokens / self.trials if self.trials > 0 else None

    def to_list(self) -> list[float]:
        return [self.passes, self.trials, self.tokens]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> KeyStats:
        passes, trials, tokens = (float(v) for v in values)
        return cls(passes, trials, tokens)


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


class SamplerStateError(SetupError, ValueError):
    """A checkpoint's sampler state does not fit this run's sampler (one line)."""


class LearnerSampler:
    """The common part: a seeded stream of the train split, the tasks drawn by id (``take``
    returns Tasks, ``sample`` their ids), and per-key pass rates for the log where the env
    declares keys."""

    kind = "sequential"

    def __init__(self, env: LearnerEnv, seed: int, group_size: int):
        self.env, self.seed, self.group_size = env, seed, group_size
        self.stream = PromptStream(env, "train", seed=seed)
        keys = env.curriculum_keys()
        self.keys: list[str] = list(keys) if keys else []
        self.stats: dict[str, KeyStats] = {k: KeyStats() for k in self.keys}
        self._drawn: dict[str, Task] = {}  # ids handed out, not yet updated
        self._group_keys: dict[str, str] = {}

    # -- drawing --------------------------------------------------------------------------
    def take(self, n: int) -> list[Task]:
        """The next ``n`` tasks (``sample``'s ids, as Tasks)."""
        ids = self.sample(n)
        return [self._drawn.get(i) or self.env.pack.get(i) for i in ids]

    def sample(self, n: int) -> list[str]:
        tasks = self.stream.take(n)
        return self._handed_out(tasks)

    def _handed_out(self, tasks: list[Task], group_keys: list[str] | None = None) -> list[str]:
        for i, task in enumerate(tasks):
            self._drawn[task.id] = task
            self._group_keys[task.id] = (group_keys[i] if group_keys
                                         else self._key(task) or "all")
        return [t.id for t in tasks]

    def _key(self, task: Task) -> str | None:
        return self.env.curriculum_key(task) if self.keys else None

    def group_key(self, task_id: str) -> str:
        """What the step's mix counts a drawn task under (its key; ``all`` on a pack without
        keys; ``new`` / ``revisit`` for the keyless curriculum)."""
        return self._group_keys.get(task_id, "all")

    # -- learning from the graded episodes ------------------------------------------------
    def update(self, task_ids: Sequence[str], rewards: Sequence[float],
               costs: Sequence[float]) -> None:
        by_key: dict[str, list[float]] = {}
        for task_id, reward, cost in zip(task_ids, rewards, costs, strict=True):
            key = self._update_key(task_id)
            if key is None:
                continue
            acc = by_key.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += float(reward)
            acc[1] += 1.0
            acc[2] += float(cost)
        for key, (passes, trials, tokens) in by_key.items():
            self.stats.setdefault(key, KeyStats()).observe(passes, trials, tokens)

    def forget(self, task_id: str) -> None:
        """Drop what was kept of a drawn task once its step is done with it."""
        self._drawn.pop(task_id, None)
        self._group_keys.pop(task_id, None)

    def _update_key(self, task_id: str) -> str | None:
        if not self.keys:
            return None
        task = self._drawn.get(task_id) or self.env.pack.get(task_id)
        return self._key(task)

    def pass_rates(self) -> dict[str, float]:
        """Each key's smoothed pass rate (the log's ``pass_rate/<key>``)."""
        return {k: s.pass_rate for k, s in self.stats.items()}

    def shares(self) -> dict[str, float]:
        """The chance of each key on the next draw (empty where draws are not by key)."""
        return {}

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "position": self.stream.position,
                "stats": {k: s.to_list() for k, s in self.stats.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        kind = state.get("kind", "sequential")
        if kind != self.kind:
            raise SamplerStateError(f"the checkpoint was written with --sampler {kind}: resume "
                                    f"with --sampler {kind} (this run has {self.kind})")
        self.stream.position = int(state.get("position", 0))
        self.stats = {k: KeyStats.from_list(v) for k, v in state.get("stats", {}).items()}
        for k in self.keys:
            self.stats.setdefault(k, KeyStats())


class KeyedSampler(LearnerSampler):
    """``uniform`` or ``curriculum`` over the env's keys: each draw picks a key (evenly, or by
    ``key_shares`` of ``key_weight``), then that key's next task in the seeded stream's order
    (each key keeps its own position in it)."""

    def __init__(self, env: LearnerEnv, seed: int, group_size: int, kind: str):
        super().__init__(env, seed, group_size)
        if not self.keys:
            raise ValueError(f"pack '{env.pack.name}' declares no curriculum keys")
        self.kind = kind
        self.rng = np.random.default_rng([seed, 47])
        self.cursors = {k: 0 for k in self.keys}
        self._key_at: dict[int, str] = {}  # stream position -> key (positions scanned)

    def shares(self) -> dict[str, float]:
        if self.kind == "uniform":
            return {k: 1.0 / len(self.keys) for k in self.keys}
        costs = [c for s in self.stats.values() if (c := s.cost) is not None]
        unseen_cost = float(np.mean(costs)) if costs else 1.0
        weights = [key_weight(self.stats[k].pass_rate, self.group_size,
                              self.stats[k].cost or unseen_cost) for k in self.keys]
        return dict(zip(self.keys, key_shares(weights), strict=True))

    def sample(self, n: int) -> list[str]:
        shares = self.shares()
        picks = self.rng.choice(len(self.keys), size=n, p=list(shares.values()))
        tasks = [self._next_of(self.keys[i]) for i in picks]
        return self._handed_out(tasks)

    def _next_of(self, key: str) -> Task:
        """The first task of ``key`` at or after its position in the stream's order."""
        pos = self.cursors[key]
        for _ in range(SCAN_LIMIT):
            known = self._key_at.get(pos)
            if known is None or known == key:
                task = self.stream_task(pos)
                known = self._key(task) or ""
                if len(self._key_at) > 4 * SCAN_LIMIT:
                    self._key_at.clear()
                self._key_at[pos] = known
                if known == key:
                    self.cursors[key] = pos + 1
                    return task
            pos += 1
        raise ValueError(f"no train task of key '{key}' within {SCAN_LIMIT} tasks of pack "
                         f"'{self.env.pack.name}'")

    def stream_task(self, position: int) -> Task:
        return self.env.pack.task_at("train", self.stream._index(position))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "cursors": dict(self.cursors),
                "rng": rng_state(self.rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        cursors = state.get("cursors", {})
        if set(cursors) != set(self.keys):
            raise SamplerStateError(
                f"the checkpoint's curriculum keys {sorted(cursors)} are not this env's "
                f"{sorted(self.keys)}: resume with the same --env-kwargs")
        self.cursors = {k: int(v) for k, v in cursors.items()}
        self.rng.bit_generator.state = state["rng"]


class PoolSampler(LearnerSampler):
    """``curriculum`` on a pack without keys: every task is its own key. A share
    ``POOL_SHARE`` of draws revisits the tasks already graded (the last ``POOL_SIZE``), by
    ``key_weight``; the rest are the stream's next tasks."""

    kind = "curriculum"

    def __init__(self, env: LearnerEnv, seed: int, group_size: int):
        super().__init__(env, seed, group_size)
        self.rng = np.random.default_rng([seed, 47])
        self.pool: dict[str, KeyStats] = {}

    def shares(self) -> dict[str, float]:
        if not self.pool:
            return {}
        ids = list(self.pool)
        costs = [c for s in self.pool.values() if (c := s.cost) is not None]
        unseen_cost = float(np.mean(costs)) if costs else 1.0
        weights = [key_weight(self.pool[i].pass_rate, self.group_size,
                              self.pool[i].cost or unseen_cost) for i in ids]
        return dict(zip(ids, key_shares(weights), strict=True))

    def sample(self, n: int) -> list[str]:
        shares = self.shares()
        revisit = self.rng.random(n) < POOL_SHARE if shares else np.zeros(n, dtype=bool)
        picks: Any = (self.rng.choice(len(shares), size=int(revisit.sum()),
                                 p=list(shares.values())) if revisit.any() else [])
        ids, fresh = list(shares), iter(self.stream.take(int((~revisit).sum())))
        chosen = iter(picks)
        tasks, labels = [], []
        for again in revisit:
            tasks.append(self.env.pack.get(ids[next(chosen)]) if again else next(fresh))
            labels.append("revisit" if again else "new")
        return self._handed_out(tasks, labels)

    def update(self, task_ids: Sequence[str], rewards: Sequence[float],
               costs: Sequence[float]) -> None:
        by_task: dict[str, list[float]] = {}
        for task_id, reward, cost in zip(task_ids, rewards, costs, strict=True):
            acc = by_task.setdefault(task_id, [0.0, 0.0, 0.0])
            acc[0] += float(reward)
            acc[1] += 1.0
            acc[2] += float(cost)
        for task_id, (passes, trials, tokens) in by_task.items():
            stats = self.pool.pop(task_id, None) or KeyStats()
            stats.observe(passes, trials, tokens)
            self.pool[task_id] = stats  # the newest last: the oldest leave first
        while len(self.pool) > POOL_SIZE:
            self.pool.pop(next(iter(self.pool)))
        super().update(task_ids, rewards, costs)

    def pass_rates(self) -> dict[str, float]:
        if not self.pool:
            return {}
        return {"pool": float(np.mean([s.pass_rate for s in self.pool.values()]))}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "pool": {i: s.to_list() for i, s in self.pool.items()},
                "rng": rng_state(self.rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.pool = {i: KeyStats.from_list(v) for i, v in state.get("pool", {}).items()}
        self.rng.bit_generator.state = state["rng"]


SAMPLERS = ("sequential", "uniform", "curriculum")


def build_sampler(name: str, env: LearnerEnv, seed: int, group_size: int) -> LearnerSampler:
    """``--sampler``'s sampler over ``env``'s train split."""
    if name not in SAMPLERS:
        raise ValueError(f"--sampler must be one of {SAMPLERS}, got {name!r}")
    if name == "sequential":
        return LearnerSampler(env, seed, group_size)
    keyed = bool(env.curriculum_keys())
    if keyed:
        return KeyedSampler(env, seed, group_size, name)
    if name == "uniform":  # no keys: every task alike, which the seeded stream already is
        sampler = LearnerSampler(env, seed, group_size)
        sampler.kind = "uniform"
        return sampler
    return PoolSampler(env, seed, group_size)


def mix_metrics(group_keys: Sequence[str], spread: Sequence[bool], tokens: float,
                episodes: int, pass_rates: dict[str, float]) -> dict[str, float]:
    """A step's curriculum figures: the share of its groups per key (``mix/<key>``), the
    groups with reward spread (``signal/groups``) per episode and per 1,000 tokens, and each
    key's pass rate as the sampler estimates it (``pass_rate/<key>``)."""
    n = len(group_keys)
    signal = int(sum(bool(s) for s in spread))
    out: dict[str, float] = {
        "signal/groups": signal,
        "signal/per_episode": signal / episodes if episodes else 0.0,
        "signal/per_1k_tokens": 1000.0 * signal / tokens if tokens else 0.0,
        "signal/tokens": float(tokens),
    }
    counts: dict[str, int] = {}
    for key in group_keys:
        counts[key] = counts.get(key, 0) + 1
    keys = sorted(set(counts) | set(pass_rates if len(pass_rates) <= 64 else {}))
    for key in keys:
        out[f"mix/{key}"] = counts.get(key, 0) / n if n else 0.0
    for key, p in pass_rates.items() if len(pass_rates) <= 64 else ():
        out[f"pass_rate/{key}"] = p
    return out


def step_update(sampler: LearnerSampler, tasks: Sequence[Task], passed: Sequence[bool],
                costs: Sequence[float], graded: Sequence[bool], spread: Sequence[bool],
                group_size: int, gather: Callable[[Any], list[Any]] | None = None
                ) -> dict[str, float]:
    """Tell ``sampler`` how a step's episodes went (every process's: ``gather``), and return
    the step's ``mix_metrics``. Episodes whose grading failed (``graded`` False) teach it
    nothing: the infrastructure failed, not the policy."""
    ids = [t.id for t in tasks for _ in range(group_size)]
    mine = (ids, [float(p) for p in passed], [float(c) for c in costs], [bool(g) for g in graded],
            [t.id for t in tasks], [bool(s) for s in spread])
    parts = gather(mine) if gather is not None else [mine]
    all_ids: list[str] = []
    rewards: list[float] = []
    tokens: list[float] = []
    keys: list[str] = []
    spreads: list[bool] = []
    total_tokens, episodes = 0.0, 0
    for p_ids, p_passed, p_costs, p_graded, p_groups, p_spread in parts:
        for task_id, reward, cost, ok in zip(p_ids, p_passed, p_costs, p_graded, strict=True):
            total_tokens += cost
            episodes += 1
            if ok:
                all_ids.append(task_id)
                rewards.append(reward)
                tokens.append(cost)
        keys += [sampler.group_key(i) for i in p_groups]
        spreads += p_spread
    sampler.update(all_ids, rewards, tokens)
    for parts_ids in parts:
        for task_id in parts_ids[4]:
            sampler.forget(task_id)
    return mix_metrics(keys, spreads, total_tokens, episodes, sampler.pass_rates())
