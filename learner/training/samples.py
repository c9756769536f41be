"""A step's samples on one process (``StepSamples``): G completions for each task, their grades,
and the reward the step trains on, with its group moments computed once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from learner.sampling.rollout import Rollout
from learner.sampling.scoring import Scores
from learner.training.grpo import GroupMoments, group_moments
from tasks import Task


@dataclass
class StepSamples:
    """Rows are task-major: row ``i`` belongs to group ``i // group_size``, a group per task.

    ``shaping`` is what the learner adds to the env's reward (DAPO's overlong penalty; None
    when off). Samples whose grading failed (``graded`` False) count in no group's moments.
    ``metric`` is what must differ within a group for it to be informative (``--dynamic-
    sampling-metric``: the env's verdict, accuracy, or the shaped reward); ``informative``
    (global, over processes) and ``short`` (how many of P informative groups a dynamic-sampling
    step lacked after its last round) are the collector's.
    """

    tasks: list[Task]
    prompts: list[str]  # the env's prompt of each task (the user message)
    rollout: Rollout
    scores: Scores
    group_size: int
    shaping: Tensor | None = None  # (B,)
    tries: int = 1  # generation rounds it took (``--dynamic-sampling``)
    generate_s: float = 0.0
    score_s: float = 0.0
    metric: str = "accuracy"
    informative_groups: int | None = None
    short: int = 0
    # --async-steps 1 with the learner's own loop: the engine mismatch measured at draw time.
    draw_mismatch: dict[str, float] = field(default_factory=dict)
    moments: GroupMoments = field(init=False)

    def __post_init__(self) -> None:
        graded = self.graded
        self.moments = group_moments(self.rewards[graded], self.groups[graded], len(self.tasks))

    @property
    def device(self) -> torch.device:
        """The run's device, where the rollout is: every tensor made from the samples is too
        (the CPU for grades without a rollout's tensors)."""
        ids = getattr(self.rollout, "completion_ids", None)
        return torch.device("cpu") if ids is None else ids.device

    @property
    def groups(self) -> Tensor:
        return torch.arange(len(self.tasks), device=self.device).repeat_interleave(
            self.group_size)

    @property
    def graded(self) -> Tensor:
        """(B,) bool: the env graded the sample (no sandbox failure)."""
        return ~torch.tensor(self.scores.infra_error, dtype=torch.bool, device=self.device)

    @property
    def rewards(self) -> Tensor:
        """(B,) the reward trained on: the env's plus the learner's shaping."""
        rewards = torch.tensor(self.scores.rewards, dtype=torch.float64, device=self.device)
        return rewards if self.shaping is None else rewards + self.shaping.double()

    @property
    def reward_spread(self) -> Tensor:
        """(groups,) bool: the group's rewards differ, so its advantages are not all 0."""
        return self.moments.std > 0

    @property
    def informative(self) -> Tensor:
        """(groups,) bool: what ``metric`` names differs within the group (graded samples
        only): the env's verdict (``passed``; DAPO keeps a group that is neither all right nor
        all wrong) or the reward trained on (``reward_spread``)."""
        if self.metric == "reward":
            return self.reward_spread
        graded = self.graded
        passed = torch.tensor([bool(p) for p in self.scores.passed], dtype=torch.float64,
                              device=self.device)
        return group_moments(passed[graded], self.groups[graded], len(self.tasks)).std > 0

    @staticmethod
    def concat(parts: list[StepSamples], pad_id: int) -> StepSamples:
        """Several generation rounds of one step as one set of samples."""
        return StepSamples(
            tasks=[t for p in parts for t in p.tasks],
            prompts=[t for p in parts for t in p.prompts],
            rollout=Rollout.concat([p.rollout for p in parts], pad_id),
            scores=Scores.concat([p.scores for p in parts]),
            group_size=parts[0].group_size,
            shaping=None if parts[0].shaping is None
            else torch.cat([p.shaping for p in parts if p.shaping is not None]),
            tries=len(parts),
            generate_s=sum(p.generate_s for p in parts),
            score_s=sum(p.score_s for p in parts),
            metric=parts[0].metric,
        )

    def groups_for_log(self, n: int | None, advantages: Tensor) -> list[dict[str, Any]]:
        """The first ``n`` groups (None: all) as ``samples.jsonl`` records them."""
        out, g, roll = [], self.group_size, self.rollout
        for i, task in enumerate(self.tasks[:n]):
            rows = range(i * g, (i + 1) * g)
            out.append({
                "task_id": task.id,
                "prompt": self.prompts[i],
                "completions": [roll.texts[r] for r in rows],
                "rewards": [self.scores.components[r] for r in rows],
                "reward": [self.scores.rewards[r] for r in rows],
                "passed": [self.scores.passed[r] for r in rows],
                # The verdict's reason (the env's info["reason"]), so a reader sees why.
                "reasons": [self.scores.infos[r].get("reason") if self.scores.infos else None
                            for r in rows],
                "advantages": [round(float(advantages[r]), 4) for r in rows],
            })
            if roll.transcripts is not None:  # multi-turn: every turn, with its role
                out[-1]["transcripts"] = [roll.transcripts[r] for r in rows]
                out[-1]["truncated"] = [bool(roll.truncated[r]) for r in rows]
        return out
