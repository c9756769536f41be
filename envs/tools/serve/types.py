"""The wire types of a served grpo-gym env: the action carries the completion, the observation
the next prompt and, once graded, the grading details; nothing that gives the answer away
(no verdict details, golds or tests) is ever part of them."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, StrictStr


class CompletionAction(Action):
    """One turn of the policy: the completion text (a final answer, or a tool call)."""

    completion: StrictStr = Field(description="the model's completion for the current turn")


class CompletionObservation(Observation):
    """What the policy sees after ``reset`` or a turn. Before ``done`` only ``prompt`` (and, on
    a tool turn, ``tool_output``) says anything about the task; the grading fields are filled
    once the answer is graded."""

    prompt: str = Field(default="", description="the next user turn (the task's prompt after "
                        "reset, the tool's output after a tool call); empty when done")
    task_id: str | None = Field(default=None, description="the task this episode plays")
    pack_version: str | None = Field(default=None, description="the task pack's version")
    reason: str | None = Field(default=None, description="the verdict's reason, once graded")
    passed: bool | None = Field(default=None, description="whether the answer passed, once graded")
    rewards: dict[str, float] = Field(default_factory=dict,
                                      description="reward by component, once graded")
    grading_s: float | None = Field(default=None, description="seconds the grading took")
    infra_error: bool = Field(default=False, description="the grading infrastructure failed: "
                              "the reward says nothing about the completion (drop the sample)")
    tool_output: str | None = Field(default=None,
                                    description="the tool's output, on a tool turn")
    tool_status: str | None = Field(default=None,
                                    description="the tool call's status, on a tool turn")


class EpisodeState(State):
    """``episode_id`` and ``step_count`` (OpenEnv's), and the task being played."""

    task_id: str | None = Field(default=None, description="the task of the current episode")
