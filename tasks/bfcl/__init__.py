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
    """The tasks of one BFCL category, and how many were left out as inconsistent."""
    questions = _read_jsonl(package_file("bfcl_eval", f"data/BFCL_v4_{category}.json",
                                         install_hint=INSTALL_HINT))
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(package_file(
        "bfcl_eval", f"data/possible_answer/BFCL_v4_{category}.json",
        install_hint=INSTALL_HINT))}
    out, dropped = [], 0
    for q in questions:
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
