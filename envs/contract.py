"""The env -> learner contract: every hook ``learner/`` calls on an env (``LearnerEnv``) and the
``info`` keys it reads from a ``score`` or an episode's last ``step`` (``ScoreInfo``).

``envs.base.TaskEnv`` satisfies both; a third-party env that subclasses it inherits them, and one
written from scratch knows from here what it must provide. A protocol, as ``envs.episode``'s
``EpisodeEnv`` is, so the learner's type hints name the contract rather than one base class.
``tests/test_learner_env.py`` checks every registered ``grpo/*`` env and the example domain
against both (hooks present with the call shape below, info from real ``score`` calls typed).
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from envs.verify.verdict import Verdict

# No ``from __future__ import annotations`` here: TypedDict reads ``NotRequired`` only from
# evaluated annotations, so the type-only names below are quoted instead.

if TYPE_CHECKING:
    from envs.flags import Flag
    from envs.perturb import Perturbation
    from tasks import Pack, Task


class ScoreInfo(TypedDict):
    """The info of ``score`` (and of an episode's graded last step) as the learner reads it."""

    # The task (``TaskEnv.task_info``): samples.jsonl, heldout.jsonl and the report name them.
    task_id: str
    pack: str
    pack_version: str
    split: str
    # The grade: ``rewards`` are the named components before weighting (0..1 each), ``passed``
    # is correctness (dynamic sampling and the hack monitor read it, not the shaped reward).
    rewards: dict[str, float]
    passed: bool
    reason: str
    extracted: Any
    verdict: Verdict  # ``details["error"]`` / ``["sandbox_error"]`` name an infrastructure failure
    grading_s: float  # seconds grading took (time/grade_* metrics)
    hit_time_limit: bool  # samples/grade_timeouts
    # True when the grading infrastructure failed (``envs.base.is_infra_error``): the sample is
    # dropped from the update, not scored 0. Absent means False.
    infra_error: NotRequired[bool]
    # An episode with a tool (``envs.episode``): the turns/* and tool/* metrics.
    turns: NotRequired[int]
    tool_calls: NotRequired[int]
    tool_errors: NotRequired[int]
    tool_s: NotRequired[float]
    truncated_turns: NotRequired[bool]


#: A step's info: once graded, ``ScoreInfo`` (with the episode's counters); before, the task's
#: keys, the counters and ``tool_status``.
StepInfo = ScoreInfo | dict[str, Any]
#: gymnasium's ``(observation, reward, terminated, truncated, info)``.
StepResult = tuple[str, float, bool, bool, StepInfo]


class LearnerEpisode(Protocol):
    """One task's turns (``envs.episode.Episode``): gymnasium's ``step`` semantics."""

    def step(self, action: str) -> StepResult: ...


class LearnerEnv(Protocol):
    """Every attribute and hook of an env that ``learner/`` uses (``envs.base.TaskEnv`` has all).

    Thread safety: ``score``, ``episode`` and a distinct episode's ``step`` are called from many
    threads at once (the learner grades a step's completions concurrently).
    """

    # Read-only members (properties here), so that a class attribute or an instance attribute
    # of a narrower type (``TaskEnv``'s ``dict`` and ``tuple``) meets them for a type checker.
    @property
    def env_id(self) -> str: ...  # "" when unregistered: the report then names the class

    @property
    def pack(self) -> "Pack": ...  # tasks by split and index, ``name``, version

    @property
    def max_turns(self) -> int: ...  # 1: single-turn; more: the learner runs episodes

    @property
    def reward_weights(self) -> Mapping[str, float]: ...  # the reward is the weighted sum

    @property
    def default_weights(self) -> Mapping[str, float]: ...  # the components the env emits

    @property
    def check_components(self) -> Sequence[str]: ...  # the skill's components (rest: shaping)

    @property
    def perturbation_kinds(self) -> Sequence["Perturbation"]: ...  # the gates' prompt variants

    def prompt(self, task: "Task") -> str: ...

    def score(self, task: "Task | str", completion: str) -> tuple[float, ScoreInfo]: ...

    def episode(self, task: "Task | str") -> LearnerEpisode: ...

    def tool_call_end(self, text: str) -> int | None: ...

    def answer_end(self, text: str) -> int | None: ...

    def flag(self, task: "Task | str", completion: str, verdict: Verdict | None = None, *,
             truncated: bool = False, typical_chars: float | None = None) -> list["Flag"]: ...

    def perturbations(self, task: "Task | str") -> dict[str, str]: ...

    def infra_outage(self) -> str | None: ...

    def no_signal_hint(self) -> str: ...

    # The curriculum's keys (``envs.task_sampling``): a level, family, subject or task name;
    # None where the pack declares none.
    def curriculum_key(self, task: "Task") -> str | None: ...

    def curriculum_keys(self) -> list[str] | None: ...
