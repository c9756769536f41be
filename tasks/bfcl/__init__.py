"""Function-call arguments from the Berkeley Function Calling Leaderboard (BFCL v4), read from
the installed ``bfcl-eval`` package (Apache-2.0) without importing it.

Categories ``simple_python``, ``live_simple``, ``multiple`` and ``live_multiple``: a user query
and the function the ground truth calls (for ``multiple``, the one the ground truth picks among
several). The task is to write that call's arguments as JSON.

BFCL describes parameters in a JSON-Schema dialect (``dict``, ``float``, ``tuple``, ``any``);
``json_schema`` maps it to standard JSON Schema (draft 7) and forbids parameters the function
does not declare. BFCL's ground truth lists the acceptable values of each parameter, ``""``
meaning "may be left out"; ``expected_value`` writes that in the expected-value form the JSON
env reads (``{"$anyOf": [...]}`` / ``{"$absent": true}``, see ``envs.verify.json_content``).
Tasks whose ground truth does not validate against their converted schema are left out.

BFCL repeats some queries across categories; a repeated (query, function) pair is kept once,
and the train/test split hashes the query text, so no test prompt is also a train prompt.

Since 1.1.0 the tasks that an answer built from the schema alone passes in full are left out
(``SCHEMA_ONLY``, each with why: a call without arguments or with optional ones only, an
answer that is one enum value, the query verbatim; found by ``grpo/JsonSchema-v0``'s
``trivially_passed``): their reward is
payable without reading the query, so they teach nothing and pay a policy that never reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from tasks.sources import in_test_split, package_file

INSTALL_HINT = "pip install --no-deps bfcl-eval==2026.3.23"
CATEGORIES = ("simple_python", "live_simple", "multiple", "live_multiple")
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
DRAFT7 = "http://json-schema.org/draft-07/schema#"
_DROPPED_KEYS = {"optional"}  # BFCL-only flag; "required" already says it
ABSENT: dict[str, Any] = {"$absent": True}


#: BFCL ids left out since 1.1.0, and why: a schema-only answer (``envs.verify.json_baselines``)
#: passes each in full. Kept here, not silently filtered, so the pack's provenance stays visible.
SCHEMA_ONLY: dict[str, str] = {
    "live_multiple_14-4-6": "the schema's last enum value or maximum is the answer",
    "live_multiple_19-4-11": "the schema's first enum value or minimum is the answer",
    "live_multiple_79-36-0": "the schema's first enum value or minimum is the answer",
    "live_multiple_107-43-5": "the schema's last enum value or maximum is the answer",
    "live_multiple_204-90-6": "no arguments: {} is the call",
    "live_multiple_225-99-0": "no arguments: {} is the call",
    "live_multiple_250-114-0": "no arguments: {} is the call",
    "live_multiple_989-220-0": "every argument may be left out: {} is the call",
    "live_multiple_1013-242-0": "the schema's first enum value or minimum is the answer",
    "live_simple_23-5-1": "the schema's first enum value or minimum is the answer",
    "live_simple_177-103-0": "the schema's first enum value or minimum is the answer",
    "live_simple_229-120-0": "the schema's last enum value or maximum is the answer",
    "live_simple_247-129-0": "no arguments: {} is the call",
    "live_simple_249-131-0": "the argument is the query verbatim",
    "live_multiple_10-4-2": "the schema's last enum value or maximum is the answer",
    "live_multiple_20-4-12": "the schema's last enum value or maximum is the answer",
    "live_multiple_88-38-5": "every argument may be left out: {} is the call",
    "live_multiple_94-41-1": "every argument may be left out: {} is the call",
    "live_multiple_117-45-2": "no arguments: {} is the call",
    "live_multiple_118-45-3": "no arguments: {} is the call",
    "live_multiple_119-45-4": "no arguments: {} is the call",
    "live_multiple_120-45-5": "no arguments: {} is the call",
    "live_multiple_171-71-0": "the schema's first enum value or minimum is the answer",
    "live_multiple_174-72-0": "the schema's first enum value or minimum is the answer",
    "live_multiple_198-90-0": "no arguments: {} is the call",
    "live_multiple_199-90-1": "no arguments: {} is the call",
    "live_multiple_205-90-7": "no arguments: {} is the call",
    "live_multiple_213-91-7": "the schema's first enum value or minimum is the answer",
    "live_multiple_244-108-0": "no arguments: {} is the call",
    "live_multiple_245-109-0": "no arguments: {} is the call",
    "live_multiple_246-110-0": "no arguments: {} is the call",
    "live_multiple_248-112-0": "no arguments: {} is the call",
    "live_multiple_249-113-0": "no arguments: {} is the call",
    "live_multiple_252-116-0": "no arguments: {} is the call",
    "live_multiple_260-124-0": "no arguments: {} is the call",
    "live_multiple_333-132-23": "every argument may be left out: {} is the call",
    "live_multiple_910-189-0": "no arguments: {} is the call",
    "live_multiple_958-204-0": "the schema's first enum value or minimum is the answer",
    "live_multiple_959-204-1": "the schema's first enum value or minimum is the answer",
    "live_multiple_986-217-0": "no arguments: {} is the call",
    "live_multiple_987-218-0": "no arguments: {} is the call",
    "live_multiple_998-229-0": "no arguments: {} is the call",
    "live_multiple_999-230-0": "no arguments: {} is the call",
    "live_multiple_1011-240-0": "every argument may be left out: {} is the call",
    "live_multiple_251-115-0": "no arguments: {} is the call",
    "live_multiple_951-200-0": "no arguments: {} is the call",
    "live_multiple_1023-252-0": "no arguments: {} is the call",
    "live_simple_25-5-3": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_176-102-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_179-104-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_83-38-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_112-43-10": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_581-157-2": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_22-5-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_24-5-2": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_174-100-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_175-101-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_simple_178-103-1": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_76-35-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_78-35-2": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_92-40-2": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_108-43-6": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_109-43-7": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_110-43-8": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_113-44-0": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_209-91-3": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_210-91-4": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_749-169-4": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
    "live_multiple_759-169-14": "the answer is one enum value each (booleans aside): a guess among the schema's values passes",
}


def json_schema(spec: dict[str, Any], *, top: bool = False) -> dict[str, Any]:
    """A BFCL parameter spec as standard JSON Schema."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "type":
            mapped = _TYPES.get(value, value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = json_schema(value)
        elif key not in _DROPPED_KEYS:
            out[key] = value
    if top:
        if "properties" in out:
            out.setdefault("additionalProperties", False)
        # Draft 7 has every keyword BFCL uses, and its meta-schema checks several times faster.
        out = {"$schema": DRAFT7, **out}
    return out


def _any_of(options: list[Any]) -> Any:
    return options[0] if len(options) == 1 else {"$anyOf": options}


def _is_any_of(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"$anyOf"}


def expected_value(options: list[Any], *, optional: bool = False) -> Any:
    """BFCL's acceptable values of one parameter as an expected value (``$anyOf``/``$absent``).

    For an optional parameter BFCL writes ``None`` for "its default, null": leaving the
    parameter out means the same, and a schema that does not allow null could not accept it.
    """
    if not options:
        raise ValueError("a parameter with no acceptable value")
    return _any_of([ABSENT if optional and o is None else _option(o) for o in options])


def _option(option: Any) -> Any:
    if option == "":
        return ABSENT
    if isinstance(option, dict):  # a dict argument: each key again lists its acceptable values
        return {k: expected_value(v) if isinstance(v, list) else v for k, v in option.items()}
    if isinstance(option, list):
        return [_option(x) if isinstance(x, dict) else x for x in option]
    return option


def accepted_example(expected: Any) -> Any:
    """One concrete value the expected structure accepts (for checking it against the schema)."""
    if _is_any_of(expected):
        present = [o for o in expected["$anyOf"] if o != ABSENT]
        return accepted_example(present[0]) if present else ABSENT
    if isinstance(expected, dict):
        picked = {k: accepted_example(v) for k, v in expected.items()}
        return {k: v for k, v in picked.items() if v != ABSENT}
    if isinstance(expected, list):
        return [accepted_example(v) for v in expected]
    return expected


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _query(turns: list[list[dict[str, str]]]) -> str:
    return "\n\n".join(m["content"] for m in turns[0])


def records(category: str) -> tuple[list[dict[str, Any]], int]:
    """The tasks of one BFCL category, and how many were left out (inconsistent, or in
    ``SCHEMA_ONLY``)."""
    questions = _read_jsonl(package_file("bfcl_eval", f"data/BFCL_v4_{category}.json",
                                         install_hint=INSTALL_HINT))
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(package_file(
        "bfcl_eval", f"data/possible_answer/BFCL_v4_{category}.json",
        install_hint=INSTALL_HINT))}
    out, dropped = [], 0
    for q in questions:
        if q["id"] in SCHEMA_ONLY:
            dropped += 1
            continue
        truth = answers.get(q["id"])
        if not truth or len(truth) != 1:
            dropped += 1
            continue
        (name, args), = truth[0].items()
        function = next((f for f in q["function"] if f["name"] == name), None)
        if function is None:
            dropped += 1
            continue
        schema = json_schema(function["parameters"], top=True)
        try:
            required = set(schema.get("required", []))
            expected = {param: expected_value(opts, optional=param not in required)
                        for param, opts in args.items()}
            validator = jsonschema.Draft7Validator(
                schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
            jsonschema.Draft7Validator.check_schema(schema)
            consistent = validator.is_valid(accepted_example(expected))
        except (jsonschema.SchemaError, ValueError):  # ValueError: no acceptable value
            consistent = False
        if not consistent:
            dropped += 1
            continue
        out.append({"id": q["id"], "category": category, "function": name,
                    "description": function.get("description", ""), "query": _query(q["question"]),
                    "schema": schema, "schema_text": json.dumps(schema, indent=2),
                    "expected": expected})
    return out, dropped


def load() -> dict[str, list[dict[str, Any]]]:
    # BFCL is an evaluation set without a train split: 80/20 by a stable hash of the query.
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    seen: set[tuple[str, str]] = set()
    for category in CATEGORIES:
        for rec in records(category)[0]:
            key = (" ".join(rec["query"].split()), rec["schema_text"])
            if key in seen:
                continue
            seen.add(key)
            test = in_test_split("bfcl/" + " ".join(rec["query"].split()))
            splits["test" if test else "train"].append(rec)
    return splits
