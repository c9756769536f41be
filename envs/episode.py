"""One episode of a ``TaskEnv``: the turns of one task, until the answer is graded.

A single-turn env grades the first action and ends. An env with a tool (``python_tool=True``)
runs each turn that ends with a tool call (``TaskEnv.tool_call_end``) and returns the tool's
output as the next observation (reward 0.0, not terminated); the first turn without a call, or
with a final answer before it, is graded and ends the episode (``terminated``). At ``max_turns``
a turn that still calls the tool is graded as given instead (``truncated``).

Only the final turn is graded, alone: earlier turns and tool outputs are never part of the graded
text, so a tool turn cannot hedge, restate or print its way into the grade, and every soundness
rule of the env's checker applies to the final answer as it would to a single-turn completion.

Episodes are independent objects: distinct ones may be stepped concurrently from threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from envs.contract import ScoreInfo, StepResult
from envs.grading import Elapsed, infra_failure_info
from envs.spaces import text_problem
from tasks import Task

if TYPE_CHECKING:
    from envs.python_tool import PythonTool

#: The reward component of an episode with a tool: 1.0 when one of its calls ran cleanly (status
#: ok, something printed). Weight 0 (and not reported) unless ``reward_weights`` gives one: it
#: is shaping for a policy that has yet to find the tool, never part of what ``passed`` means.
TOOL_OK = "tool_ok"



class EpisodeError(RuntimeError):
    """``step`` was called without a running episode."""


class EpisodeEnv(Protocol):
    """What an episode asks of its env (``envs.base.TaskEnv`` is one). A protocol, so this
    module needs nothing from the env module that builds its episodes (no import circle)."""

    tool: PythonTool | None
    max_turns: int

    @property
    def reward_weights(self) -> Mapping[str, float]: ...

    def score(self, task: Task, completion: str) -> tuple[float, ScoreInfo]: ...

    def tool_call_end(self, text: str) -> int | None: ...

    def task_info(self, task: Task) -> dict[str, Any]: ...


class Episode:
    """The state of one task's turns. ``step(action)`` has gymnasium's step semantics."""

    def __init__(self, env: EpisodeEnv, task: Task):
        self.env = env
        self.task = task
        self.turns = 0
        self.tool_calls = 0
        self.tool_errors = 0
        self.tool_s = 0.0
        self.clean_calls = 0  # calls that ran without error and printed something
        self.done = False

    def step(self, action: str) -> StepResult:
        if self.done:
            raise EpisodeError("this episode is over: call reset() (or env.episode(task)) "
                               "to start another")
        if not isinstance(action, str):
            raise TypeError(f"an action must be a str, got {type(action).__name__}")
        env = self.env
        tool = env.tool
        if tool is None:  # single-turn: exactly the plain score
            self.done = True
            reward, info = env.score(self.task, action)
            return "", reward, True, False, info
        self.turns += 1
        if text_problem(action) is not None:  # graded invalid_text: such code never runs
            return self._graded(action, truncated=False)
        end = env.tool_call_end(action)
        if end is None:
            return self._graded(action, truncated=False)
        if self.turns >= env.max_turns:
            return self._graded(action, truncated=True)
        call = tool.find_call(action[:end])
        assert call is not None  # tool_call_end found it
        result = tool.run(call.code)
        self.tool_calls += 1
        self.tool_s += result.seconds
        if result.infra:
            return self._infra_failure(result.error)
        self.tool_errors += result.failed
        self.clean_calls += result.status == "ok" and result.printed
        step_info = env.task_info(self.task)
        step_info.update(self._counters(), tool_status=result.status)
        return result.observation, 0.0, False, False, step_info

    def _counters(self) -> dict[str, Any]:
        return {"turns": self.turns, "tool_calls": self.tool_calls,
                "tool_errors": self.tool_errors, "tool_s": Elapsed(self.tool_s)}

    def _count(self, info: ScoreInfo, truncated: bool) -> None:
        """The episode's counters, into a graded step's info."""
        info["turns"], info["tool_calls"] = self.turns, self.tool_calls
        info["tool_errors"], info["tool_s"] = self.tool_errors, Elapsed(self.tool_s)
        info["truncated_turns"] = truncated

    def _graded(self, action: str, *, truncated: bool) -> StepResult:
        self.done = True
        reward, info = self.env.score(self.task, action)
        weight = self.env.reward_weights.get(TOOL_OK, 0.0)
        if weight:  # reported only when it counts, so default rewards are the checker's alone
            tool_ok = 1.0 if self.clean_calls else 0.0
            info["rewards"] = {**info["rewards"], TOOL_OK: tool_ok}
            reward += weight * tool_ok
        self._count(info, truncated)
        return "", float(reward), not truncated, truncated, info

    def _infra_failure(self, error: str) -> StepResult:
        """The sandbox failed under a tool call: the episode ends unscored (``is_infra_error``),
        so a learner drops it rather than score the policy for the infrastructure."""
        self.done = True
        info = infra_failure_info(self.env, self.task, error)
        self._count(info, truncated=False)
        return "", 0.0, True, False, info
