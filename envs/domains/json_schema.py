"""grpo/JsonSchema-v0: structured output graded by the JSON-schema gate.

A task record holds ``schema`` (a JSON Schema), the prompt fields and, optionally,
``expected`` (the correct value, in the JSON form of ``envs.verify.json_content``: plain JSON,
plus ``{"$anyOf": [...]}`` / ``{"$absent": true}`` where several answers are right).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from envs.base import TaskEnv
from envs.flags import Flag, text_flags
from envs.grading import grade_batch
from envs.keywords import check_keywords, integer_at_least
from envs.perturb import IRRELEVANT, Perturbation, with_fields, with_instruction
from envs.verify import json as json_gate
from envs.verify.json_baselines import schema_only_values
from envs.verify.json_content import ABSENT, AnyOf
from envs.verify.json_extract import Rejected
from envs.verify.json_extract import extract as extract_json
from envs.verify.verdict import Verdict
from tasks import Task

_NOT_GIVEN = object()


def _compact_schema(pack: Any, task: Task) -> str:
    def rewrite(name: str, value: Any) -> Any:
        if name == "schema_text" and "schema" in task.fields:
            return json.dumps(task["schema"], separators=(",", ":"), ensure_ascii=False)
        return value
    return with_fields(rewrite)(pack, task)


#: The record asked for outside the training format: reworded, and the schema as compact JSON.
JSON_PERTURBATIONS = (
    Perturbation("paraphrase", "the instruction reworded",
                 with_instruction("Answer with one JSON object and nothing else.")),
    Perturbation("compact_schema", "the schema shown as compact one-line JSON", _compact_schema),
    IRRELEVANT,
)


class JsonSchemaEnv(TaskEnv):
    """Rewards, each 0 or 1 unless said otherwise:

    - ``valid``: a JSON value was found, it conforms to the task's schema (an echo of the
      schema or of its ``properties`` never counts as valid) and more than half of its content
      is right (``envs.verify.json.CONTENT_GATE``). Validity alone is no reward: a value built
      from the schema without reading the text (placeholders, range ends, the first enum
      value, defaults; ``envs.verify.json_baselines``) is valid, and must earn nothing;
    - ``content``: the fraction (0..1) of expected fields the value gets right, and 0 unless
      the value is schema-valid and the only JSON value in the text, so ``{}`` missing required
      keys, an echoed schema or several hedged values earn no content; optional keys neither
      add a field (left out, or given the value that means the same) nor cost one unless given
      wrong (``envs.verify.json_content``). For a task without ``expected`` it is validity;
    - ``format``: exactly one JSON value was found (no competing values, no extraction error),
      gated like ``valid``.

    Default weights: ``valid`` 0.5 and ``content`` 0.5, so a mostly right answer earns the
    validity half and only a correct one earns the full 1.0; ``format`` 0.1 is a small shaping
    bonus, as in MathExact. The answer is read after any ``<think>`` block
    (``envs.verify.json_extract``). ``reset`` puts the schema in ``info["schema"]``.
    """

    env_id: ClassVar[str] = "grpo/JsonSchema-v0"
    recipe_file: ClassVar[Path | None] = Path(__file__).with_name("json_schema.toml")
    default_pack: ClassVar[str] = "extract"
    default_weights: ClassVar[dict[str, float]] = {"valid": 0.5, "content": 0.5, "format": 0.1}
    required_fields: ClassVar[tuple[str, ...]] = ("schema",)
    #: ``content`` is the headline: validity alone says little about the answer.
    check_components: ClassVar[tuple[str, ...]] = ("content", "valid")
    perturbation_kinds: ClassVar[tuple[Perturbation, ...]] = JSON_PERTURBATIONS

    def __init__(self, *args: Any, max_chars: int = json_gate.MAX_CHARS,
                 max_depth: int = json_gate.MAX_DEPTH, **kwargs: Any):
        # max_chars=-1 or max_depth=0 would reject every answer: refused here instead.
        check_keywords(self.env_id, max_chars=(max_chars, integer_at_least(1)),
                       max_depth=(max_depth, integer_at_least(1)))
        super().__init__(*args, **kwargs)
        self.max_chars = max_chars
        self.max_depth = max_depth
        # Decoded expected values per task id: procedural packs rebuild records on every lookup.
        self._expected: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _expected_for(self, task: Task) -> Any:
        found = self._expected.get(task.id, _NOT_GIVEN)
        if found is _NOT_GIVEN:
            raw = task.fields.get("expected")
            found = None if raw is None else json_gate.expected_from_json(raw)
            with self._lock:
                if len(self._expected) > 4096:
                    self._expected.clear()
                self._expected[task.id] = found
        return found

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        verdict = json_gate.verify(task["schema"], completion, expected=self._expected_for(task),
                                   max_chars=self.max_chars, max_depth=self.max_depth)
        details = verdict.details
        valid = 1.0 if details.get("valid") else 0.0
        content = details.get("content")
        # Validity and form pay only beside content (``json_gate.CONTENT_GATE``): a value built
        # from the schema alone, valid and single as it is, earns neither.
        paid = 1.0 if details.get("paid_valid") else 0.0
        rewards = {
            "valid": paid,
            "content": valid if content is None else float(content),
            "format": paid if details.get("single") else 0.0,
        }
        return rewards, verdict

    def flag(self, task: Task | str, completion: str, verdict: Verdict | None = None, *,
             truncated: bool = False, typical_chars: float | None = None) -> list[Flag]:
        """Long or repetitive text, and JSON with no content (``{}``, every leaf blank or a
        placeholder such as ``"string"``)."""
        flags = text_flags(completion, truncated=truncated, typical_chars=typical_chars)
        try:
            found = extract_json(completion, self.max_depth)
        except Rejected:
            found = None
        if found is not None and _empty(found.value):
            flags.append(Flag("empty_json", f"no content in {str(found.value)[:60]!r}"))
        return flags

    def final_answer_given(self, text: str) -> bool:
        """A JSON value (or a rejected attempt at one) is a final answer: with the Python tool,
        a turn that gives one before a ```python block is graded, and the block never runs."""
        try:
            return extract_json(text, self.max_depth) is not None
        except Rejected:
            return True

    def gold_completion(self, task: Task) -> str | None:
        """The expected value as JSON (one concrete choice per ``$anyOf``); ``None`` for a task
        without ``expected``, which has no gold value to check."""
        expected = self._expected_for(task)
        if expected is None:
            return None
        value = _one_value(expected)
        return None if value is ABSENT else json.dumps(value, ensure_ascii=False)

    def shallow_completions(self, task: Task) -> dict[str, str]:
        """Name -> a schema-only answer to ``task`` as JSON text (``envs.verify.json_baselines``:
        placeholders, the ends of each range, enum ends, empty values, the schema's defaults and
        own words, the task's text as every string, the example record the prompt shows). None
        read the text for its values, so none may earn more than a sliver of the reward."""
        text = task.fields.get("text") or task.fields.get("query")
        values = schema_only_values(task["schema"], text=text if isinstance(text, str) else None,
                                    example=_shown_example(task))
        return {name: json.dumps(value, ensure_ascii=False) for name, value in values.items()}

    def trivially_passed(self, tasks: Sequence[Task]) -> dict[str, list[str]]:
        """Task id -> the schema-only answers (``shallow_completions``) that pass it, for the tasks
        that have any: ``{}`` for a call without arguments, an enum's first value where it is
        the answer. ``python -m envs validate`` refuses them: the schema alone solves them."""
        found = {}
        for task in tasks:
            shallow = self.shallow_completions(task)
            graded = grade_batch(self, [task] * len(shallow), list(shallow.values()))
            names = [name for name, (_, info) in zip(shallow, graded, strict=True)
                     if info["passed"]]
            if names:
                found[task.id] = names[:3]  # a few name the problem; every one would be a wall
        return found

    def task_info(self, task: Task) -> dict[str, Any]:
        info = super().task_info(task)
        # A copy per call: gymnasium requires that infos never share mutable objects.
        info["schema"] = copy.deepcopy(task["schema"])
        return info


_EXAMPLE = re.compile(r"as JSON: (\{.*\})\s*$", re.S)


def _shown_example(task: Task) -> Any:
    """The record a prompt shows as an example (extract's ``example=true``), or None."""
    shown = task.fields.get("example")
    match = _EXAMPLE.search(shown) if isinstance(shown, str) else None
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def _one_value(expected: Any) -> Any:
    """One value that ``expected`` accepts: the first present option of each ``AnyOf`` (an
    optional key left out can still be one the schema requires), absent keys left out."""
    if isinstance(expected, AnyOf):
        options = sorted(expected, key=lambda option: option is ABSENT)
        return _one_value(options[0])
    if isinstance(expected, dict):
        values = {k: _one_value(v) for k, v in expected.items()}
        return {k: v for k, v in values.items() if v is not ABSENT}
    if isinstance(expected, list):
        return [_one_value(v) for v in expected]
    return expected


_PLACEHOLDERS = {"", "string", "...", "n/a", "na", "none", "null", "unknown", "tbd", "todo",
                 "value", "example", "text"}


def _empty(value: Any) -> bool:
    """Every leaf missing, blank or a placeholder (numbers and booleans are content)."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip().strip("<>").lower() in _PLACEHOLDERS
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    if isinstance(value, list):
        return all(_empty(v) for v in value)
    return False
