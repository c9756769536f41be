"""The base class every grpo/* environment shares.

One episode is one task: ``reset`` returns the prompt (the user-message text; the learner applies
the chat template), ``step`` grades one completion and terminates. With a tool
(``python_tool=True``, ``max_turns``) an episode has several turns: ``step`` returns the tool's
output until the final answer is graded (``envs.episode``). Subclasses implement
``grade(task, completion) -> (rewards, verdict)`` and, to take tools, ``final_answer_given``;
the base class handles task selection, reward weighting, timing and the episode state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import gymnasium as gym
import numpy as np

from envs.contract import LearnerEnv, LearnerEpisode, ScoreInfo
from envs.episode import TOOL_OK, Episode, EpisodeError, StepResult
from envs.flags import Flag, answer_flags
from envs.grading import (  # noqa: F401 - importable from here too, as envs and tests do
    INFRA_ERROR_KEY,
    Elapsed,
    is_infra_error,
)
from envs.keywords import (
    FINITE_NUMBER,
    Accepts,
    check_keywords,
    integer_at_least,
    keyword_names,
    mapping_of,
    optional,
    unknown_keyword,
)
from envs.perturb import GENERIC, Perturbation
from envs.python_tool import PythonTool
from envs.spaces import AnyText, text_problem
from envs.verify.verdict import Verdict
from tasks import Pack, PackError, Task, load_pack
from tasks.pack import UnknownOptionError

#: ``split=`` for an env that serves a task of any split, by id only (``reset`` draws none).
ALL_SPLITS = "all"


def max_reward(env: TaskEnv | LearnerEnv) -> float:
    """The highest total reward: every positively weighted component at 1."""
    return sum(w for w in env.reward_weights.values() if w > 0)


def answer_rule(env: Any) -> Callable[[str], int | None] | None:
    """The env's ``answer_end`` where it has one of its own, None where it keeps ``TaskEnv``'s
    (no rule: the learner then decodes no text while it samples, where asking a rule that
    always says None cost a decode per token)."""
    hook = getattr(env, "answer_end", None)
    return None if hook is None or getattr(hook, "__func__", None) is TaskEnv.answer_end else hook


def make_task_env(env_id: str, **kwargs: Any) -> TaskEnv:
    """``gym.make(env_id, **kwargs).unwrapped``, typed as the ``TaskEnv`` the tools (card,
    ``validate``, ``show``, Ray's graders) use: they read its hooks by name, as they always did."""
    return cast(TaskEnv, gym.make(env_id, **kwargs).unwrapped)


class TaskEnv(gym.Env[str, str]):
    """An environment over the tasks of one pack: one step per episode, or several with a tool.

    Keyword arguments: ``pack`` (name, defaults to ``default_pack``; or a loaded ``Pack``, which
    is how ``python -m envs validate`` builds an env over a folder that is not registered),
    ``split`` ("train" or "test": ``reset`` draws from it and serves a task id only from it;
    ``"all"`` serves any split by id and draws none), ``reward_weights`` (component -> weight, overriding the
    pack's and the env's defaults), ``python_tool`` (True, or a configured ``PythonTool``: turns
    ending with a ```python block run it in the sandbox), ``max_turns`` (turns per episode, 1
    without a tool, ``DEFAULT_TOOL_TURNS`` with one) and any options of a procedural pack
    (``level=1``). Each is checked here (``envs.keywords``): a value the env cannot use, or a
    keyword neither the env nor its pack takes, is a one-line ``KeywordError``.

    Hooks let tools work without knowing the domain: the pack validator uses
    ``required_fields``, ``gold_problem`` and ``gold_completion``; the learner and the evaluation
    gates use ``check_components``, ``perturbations`` and ``flag`` (samples worth a human read).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # gymnasium declares it per instance
    env_id: ClassVar[str] = ""
    #: The env id whose packs this env reads (default: ``env_id``).
    pack_env: ClassVar[str] = ""
    default_pack: ClassVar[str] = ""
    #: The learner's recipe for this env, by variant (``learner.recipe_files``); None: the learner's
    #: own defaults.
    recipe_file: ClassVar[Path | None] = None
    #: Reward components this env emits and their default weights.
    default_weights: ClassVar[dict[str, float]] = {}
    #: Record fields ``grade`` reads, beyond ``id`` and the prompt template's fields.
    required_fields: ClassVar[tuple[str, ...]] = ()
    #: The reward components that do not depend on the answer's format, headline first; the
    #: evaluation gates score perturbed prompts with them. Default: every component but
    #: ``format`` (filled in for each subclass that does not set it).
    check_components: ClassVar[tuple[str, ...]] = ()
    #: The kinds of prompt perturbation ``perturbations`` builds (``envs.perturb``).
    perturbation_kinds: ClassVar[tuple[Perturbation, ...]] = GENERIC

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "check_components" not in cls.__dict__:
            cls.check_components = tuple(k for k in cls.default_weights if k != "format")

    def __init__(
        self,
        pack: str | Pack | None = None,
        split: str = "train",
        reward_weights: Mapping[str, float] | None = None,
        python_tool: bool | PythonTool = False,
        max_turns: int | None = None,
        **pack_options: Any,
    ):
        super().__init__()
        check_keywords(
            self.env_id or type(self).__name__,
            pack=(pack, Accepts("a pack name or a loaded Pack",
                                lambda v: v is None or isinstance(v, str | Pack))),
            split=(split, Accepts("a split name such as 'train' or 'test'",
                                  lambda v: isinstance(v, str))),
            reward_weights=(reward_weights, optional(mapping_of("component names",
                                                                FINITE_NUMBER))),
            python_tool=(python_tool, Accepts("True, False or a PythonTool",
                                              lambda v: isinstance(v, bool | PythonTool))),
            max_turns=(max_turns, optional(integer_at_least(1))),
        )
        if isinstance(pack, Pack):
            if pack_options:
                raise PackError(
                    f"options {sorted(pack_options)} apply when loading a pack by name, "
                    f"not to the loaded pack '{pack.name}'"
                )
            self.pack: Pack = pack
        else:
            self.pack = self._load_pack(pack or self.default_pack, pack_options)
        feeds = self.pack_env or self.env_id
        if feeds and self.pack.env != feeds:
            raise PackError(f"pack '{self.pack.name}' feeds {self.pack.env}, not {feeds}")
        if split != ALL_SPLITS:
            self.pack.size(split)  # raises a clear error for an unknown split
        self.split = split
        self.tool: PythonTool | None = (
            python_tool if isinstance(python_tool, PythonTool)
            else PythonTool() if python_tool else None)
        emitted = dict(self.default_weights)
        if self.tool is not None:  # an env with a tool may weight TOOL_OK (0 by default)
            emitted[TOOL_OK] = 0.0
        weights = dict(emitted)
        weights.update(self.pack.manifest.reward_weights)
        weights.update(reward_weights or {})
        unknown = set(weights) - set(emitted)
        if unknown:
            raise ValueError(
                f"unknown reward component(s) {sorted(unknown)}; "
                f"{self.env_id or type(self).__name__} emits {sorted(emitted)}"
            )
        if not weights.get(TOOL_OK):  # unweighted: not emitted at all (see envs.episode)
            weights.pop(TOOL_OK, None)
        self.reward_weights = weights
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.max_turns = _max_turns(max_turns, self.tool is not None)
        self._episode: LearnerEpisode | None = None

    def _load_pack(self, name: str, options: dict[str, Any]) -> Pack:
        try:
            return load_pack(name, **options)
        except UnknownOptionError as exc:
            # Options go to the pack, so a misspelled env keyword lands there: name both sides.
            raise unknown_keyword(self.env_id or type(self).__name__, exc.unknown,
                                  keyword_names(type(self), TaskEnv), exc.pack,
                                  exc.accepted) from None

    # -- subclass hook ----------------------------------------------------------------------
    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        """Return the named reward components (each in [0, 1]) and the verdict."""
        raise NotImplementedError

    def prompt(self, task: Task) -> str:
        """The pack's prompt, followed by how to call the tool when the env has one."""
        if self.tool is None:
            return self.pack.prompt(task)
        return f"{self.pack.prompt(task)}\n\n{self.tool.instructions}"

    def final_answer_given(self, text: str) -> bool:
        """Whether ``text`` (a turn, up to a tool call) already gives the final answer, so the
        call must not run and the turn is graded. An env taking tools overrides it with its own
        answer finder; the default finds none: only a turn without a tool call is graded."""
        return False

    def flag(self, task: Task | str, completion: str, verdict: Verdict | None = None, *,
             truncated: bool = False, typical_chars: float | None = None) -> list[Flag]:
        """Why a high-reward ``completion`` deserves a human read: likely reward hacking.

        The default applies the generic heuristics (``envs.flags``: no reasoning, several
        candidate answers, too long — ``truncated`` at the token budget or far above
        ``typical_chars`` — and repetitive); a domain overrides it to add its own. The learner
        runs it over every credited sample each step (``flags/*`` in metrics.jsonl).
        """
        return answer_flags(completion, truncated=truncated, typical_chars=typical_chars)

    def perturbations(self, task: Task | str) -> dict[str, str]:
        """Variant name -> the task's prompt asked outside the training format: by default the
        instruction reworded, dropped, and an unrelated sentence added (``envs.perturb``); a
        domain adds its own through ``perturbation_kinds``."""
        if isinstance(task, str):
            task = self.pack.get(task)
        tool = f"\n\n{self.tool.instructions}" if self.tool is not None else ""
        # The tool stays part of the env's interface under every perturbation.
        return {kind.name: kind(self.pack, task) + tool for kind in self.perturbation_kinds}

    def hit_time_limit(self, verdict: Verdict) -> bool:
        """Whether grading hit a time limit (``info["hit_time_limit"]``): a verdict whose
        reason is ``timeout``, such as the math checker's worker stopped at ``timeout``
        seconds. A domain with limits of its own overrides it (CodeTests: a test case or the
        program's whole run out of wall time). A learner counts such samples: they are where a
        slow verifier, or a policy that makes grading slow, shows first."""
        return verdict.reason == "timeout"

    def infra_outage(self) -> str | None:
        """Why the grading infrastructure as a whole does not answer now (a Docker engine that
        is down), in one line saying how to bring it back; ``None`` when it answers or the env
        needs none. A learner asks after samples came back with ``infra_error``: one lost
        container is dropped and training goes on, an outage stops the run (every sample
        would fail). The default: the Python tool's sandbox when the env has a tool."""
        return self.tool.outage() if self.tool is not None else None

    def no_signal_hint(self) -> str:
        """What to try, as a phrase ("an easier pack, or a bigger model"), when every group of
        a learner's first steps got one reward for all its completions (no reward spread, so
        nothing to learn): the task is out of the model's reach. A domain overrides it with an
        easier pack or level it knows."""
        return "an easier pack, or a bigger model"

    def curriculum_key(self, task: Task) -> str | None:
        """The difficulty key of ``task`` a curriculum weighs (``envs.task_sampling``): its
        level, family, subject or reasoning-gym task, so a learner can tell solved levels from
        hopeless ones without knowing the domain. The default asks the pack's generator (a
        procedural pack's level and options: ``L3``, ``L2-person``); a domain whose records
        carry a key of their own overrides it. ``None``: the pack declares none (a learner then
        weighs tasks one by one)."""
        key_of = getattr(getattr(self.pack, "generator", None), "curriculum_key", None)
        return key_of(task.fields) if key_of is not None else None

    def curriculum_keys(self) -> list[str] | None:
        """Every key ``curriculum_key`` gives the train split's tasks, so keys never drawn yet
        keep a share; ``None`` when the pack declares none. The default asks the pack's
        generator, else reads the keys of a finite train split's tasks (all or none keyed)."""
        keys_of = getattr(getattr(self.pack, "generator", None), "curriculum_keys", None)
        if keys_of is not None:
            return list(keys_of())
        if "train" not in self.pack.splits or self.pack.size("train") is None:
            return None
        keys = {self.curriculum_key(self.pack.task_at("train", i))
                for i in range(self.pack.size("train") or 0)}
        named = {k for k in keys if k is not None}
        return None if not keys or len(named) < len(keys) else sorted(named)

    def gold_problem(self, task: Task) -> str | None:
        """Why the task's gold is not a well-formed answer for this env (``None`` when it is).

        ``python -m envs validate`` refuses a pack whose golds have problems, before checking
        that each gold's completion earns full credit. The default finds none."""
        return None

    def gold_completion(self, task: Task) -> str | None:
        """The task's gold rendered as a completion that must pass ``score``; ``None`` means
        this env has no gold to check (``python -m envs validate`` then skips the check)."""
        return None

    def trivially_passed(self, tasks: Sequence[Task]) -> dict[str, list[str]]:
        """Task id -> the trivial answers (a constant, the input echoed) that earn it full
        marks, for the tasks that have any. ``python -m envs validate`` refuses such tasks: a
        reward payable without the skill teaches nothing. The default checks none."""
        return {}

    def mutants_passed(self, tasks: Sequence[Task]) -> dict[str, list[str]]:
        """Task id -> the wrong programs the task declares (a reference with one edge broken)
        that earn it full marks. ``python -m envs validate`` refuses such tasks: their hidden
        cases miss an edge. The default checks none."""
        return {}

    def shallow_completions(self, task: Task) -> dict[str, str]:
        """Name -> a completion a policy could write without the skill the task teaches: the
        report card's ``statistical.adversarial_floor`` grades each and reports the best
        (``python -m envs card``). A domain overrides it with its own families (the shown
        answers, a schema-only value, simple transforms of the input) and should keep these.

        The default: the empty string, the prompt echoed, a few constants, and the pack's most
        common gold answer (a policy can learn a constant that is often right) when the pack
        is small enough to count cheaply."""
        shallow = {
            "empty": "",
            "echo_prompt": self.pack.prompt(task),
            "zero": "0",
            "one": "1",
            "yes": "Yes",
            "none": "None",
        }
        common = _most_common_gold(self, task.split)
        if common is not None:
            shallow["most_common_gold"] = common
        return shallow

    # -- gymnasium API ----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            task = self.task_in_split(str(options["task_id"]))
        else:
            task = self.task_at_random(self.np_random)
        self._episode = self.episode(task)
        return self.prompt(task), self.task_info(task)

    def task_at_random(self, rng: np.random.Generator) -> Task:
        """A task of this env's split drawn with ``rng`` (``reset``'s draw: the same seed, the
        same task, in process or served)."""
        if self.split == ALL_SPLITS:
            raise PackError(f"split='{ALL_SPLITS}' serves tasks by id only: reset(options="
                            "{'task_id': ...}), or make the env with split='train' to draw one")
        size = self.pack.size(self.split)
        if size == 0:
            raise PackError(f"split '{self.split}' of pack '{self.pack.name}' is empty")
        index = int(rng.integers(size if size is not None else 2**31 - 1))
        return self.pack.task_at(self.split, index)

    def task_in_split(self, task_id: str) -> Task:
        """The task ``task_id`` names, when it is in this env's split (any split for
        ``split="all"``): a train env never hands out a test task by id. Grading by id
        (``score``, ``episode``) takes any split."""
        task = self.pack.get(task_id)
        if self.split not in (ALL_SPLITS, task.split):
            raise PackError(f"task '{task.id}' is in split '{task.split}', not this env's "
                            f"split '{self.split}': make the env with split='{task.split}' "
                            f"(or split='{ALL_SPLITS}' to serve any split by id)")
        return task

    # gymnasium types info as dict[str, Any]; ours is a ScoreInfo once graded (a dict at runtime).
    def step(self, action: str) -> StepResult:  # type: ignore[override]
        if self._episode is None:
            raise EpisodeError(
                "step() called without a running episode: call reset() first "
                "(an episode ends when its answer is graded)"
            )
        result = self._episode.step(action)
        if result[2] or result[3]:
            self._episode = None
        return result

    def close(self) -> None:
        if self.tool is not None:
            self.tool.close()
        super().close()

    # -- episodes (thread-safe: the learner steps many at once) ------------------------------
    def episode(self, task: Task | str) -> LearnerEpisode:
        """A new, independent episode of ``task`` (a Task or task id); ``reset`` makes one for
        the gymnasium ``step``."""
        return Episode(self, self.pack.get(task) if isinstance(task, str) else task)

    def tool_call_end(self, text: str) -> int | None:
        """Where a turn stops: the index just after the closing fence of the first complete
        tool call in ``text`` when no final answer comes before it, else ``None`` (always for
        an env without a tool). A learner calls it on a turn's text as it grows; ``step`` runs
        the call and ignores anything after that index."""
        if self.tool is None:
            return None
        call = self.tool.find_call(text)
        if call is None or self.final_answer_given(text[: call.start]):
            return None
        return call.end

    def answer_end(self, text: str) -> int | None:
        """Where a single-turn answer is complete: the index just after it in ``text`` once
        nothing after it could change the grade, else ``None`` (the default: the whole text
        counts). A learner calls it on a completion as it grows and stops sampling there, so
        it neither pays for nor trains on text the grade ignores; an env that does not override
        it has no rule (``answer_rule``), and its completions are never decoded while sampled."""
        return None

    # -- stateless scoring (thread-safe; the learner grades groups concurrently) ------------
    def score(self, task: Task | str, completion: str) -> tuple[float, ScoreInfo]:
        """Grade ``completion`` for ``task`` (a Task or task id) without touching episode state."""
        if isinstance(task, str):
            task = self.pack.get(task)
        if not isinstance(completion, str):
            raise TypeError(f"a completion must be a str, got {type(completion).__name__}")
        start = time.perf_counter()
        problem = text_problem(completion)
        if problem is not None:  # no grader, sandbox or tool is handed text it cannot encode
            rewards = dict.fromkeys(self.default_weights, 0.0)
            verdict = Verdict.fail("invalid_text", None, error=problem)
        else:
            rewards, verdict = self.grade(task, completion)
        elapsed = time.perf_counter() - start
        reward = sum(self.reward_weights.get(k, 0.0) * v for k, v in rewards.items())
        # The task's keys (an env may add its own) and the grade's: a ScoreInfo.
        info = cast(ScoreInfo, {
            **self.task_info(task),
            "rewards": rewards,
            "passed": verdict.passed,
            "reason": verdict.reason,
            "extracted": verdict.extracted,
            "verdict": verdict,
            "grading_s": Elapsed(elapsed),
            "hit_time_limit": self.hit_time_limit(verdict),
        })
        return float(reward), info

    def task_info(self, task: Task) -> dict[str, Any]:
        return {
            "task_id": task.id,
            "pack": self.pack.name,
            "pack_version": self.pack.pack_version,
            "split": task.split,
        }


#: Turns per episode of an env with a tool, unless ``max_turns`` says otherwise.
DEFAULT_TOOL_TURNS = 4


def _max_turns(max_turns: int | None, has_tool: bool) -> int:
    if max_turns is None:
        return DEFAULT_TOOL_TURNS if has_tool else 1
    if max_turns > 1 and not has_tool:
        raise ValueError(f"max_turns={max_turns} needs a tool (python_tool=True): without one "
                         "every turn is a final answer")
    return max_turns


#: A split is counted for its most common gold only up to this many tasks (the hook stays cheap).
COMMON_GOLD_MAX_TASKS = 20_000


def _most_common_gold(env: TaskEnv, split: str) -> str | None:
    """The gold completion most tasks of ``split`` share (counted once per env and split), or
    ``None`` when no two share one, the env has no golds or the split is too big or unbounded."""
    cache: dict[str, str | None] = env.__dict__.setdefault("_common_gold", {})
    if split in cache:
        return cache[split]
    size = env.pack.size(split)
    common = None
    if size is not None and 0 < size <= COMMON_GOLD_MAX_TASKS:
        counts = Counter(env.gold_completion(env.pack.task_at(split, i)) for i in range(size))
        counts.pop(None, None)
        if counts:
            gold, count = counts.most_common(1)[0]
            common = gold if count > 1 else None
    cache[split] = common
    return common
