"""Reading an OpenEnv server's wire types from its ``/schema``: which action field carries the
completion, and which observation field is the text the policy reads next.

The action is a JSON object schema (pydantic's ``model_json_schema``). The completion goes into
its single required string field, or the field ``action_field`` names; every other required
field would have no value, so such a schema is refused at ``gym.make`` in one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Observation keys that are OpenEnv's own bookkeeping, never the text for the policy.
BOOKKEEPING = frozenset({"done", "reward", "metadata"})
#: The observation field a grpo-gym server (``python -m envs serve``) puts the next turn in.
PROMPT_FIELD = "prompt"


class SchemaError(ValueError):
    """The server's schema cannot carry a completion as asked; one line says why."""


def _is_string(prop: Mapping[str, Any]) -> bool:
    """A string property, also as pydantic writes ``str | None`` (``anyOf``)."""
    if prop.get("type") == "string":
        return True
    return any(isinstance(p, Mapping) and p.get("type") == "string"
               for p in prop.get("anyOf", ()))


def action_field(schema: Mapping[str, Any], wanted: str | None, url: str) -> str:
    """The action field the completion fills: ``wanted`` when given (it must be a string
    field), else the single required string field; every other field must be optional."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        raise SchemaError(f"the action schema of {url} has no fields: "
                          f"{json.dumps(schema)[:120]}")
    required = [r for r in schema.get("required", ()) if isinstance(r, str)]
    strings = sorted(name for name, prop in props.items()
                     if isinstance(prop, Mapping) and _is_string(prop))
    if wanted is not None:
        if wanted not in props:
            raise SchemaError(f"action_field '{wanted}' is no field of the action of {url}; "
                              f"it has {', '.join(sorted(props))}")
        if wanted not in strings:
            raise SchemaError(f"action_field '{wanted}' of {url} is not a string field "
                              f"({json.dumps(props[wanted])[:80]})")
        field = wanted
    else:
        candidates = [r for r in required if r in strings] or (strings if not required else [])
        if len(candidates) != 1:
            what = "no" if not candidates else f"{len(candidates)} ({', '.join(candidates)})"
            raise SchemaError(f"the action of {url} has {what} required string fields for the "
                              "completion: name one with action_field= (its fields: "
                              f"{', '.join(sorted(props))})")
        field = candidates[0]
    unfilled = sorted(set(required) - {field})
    if unfilled:
        raise SchemaError(f"the action of {url} also requires {', '.join(unfilled)}, which a "
                          f"completion cannot fill (it goes into '{field}')")
    return field


def observation_text(observation: Mapping[str, Any], field: str | None) -> str:
    """The text the policy reads from an observation: ``field`` when named, else the
    ``prompt`` field a grpo-gym server sends, else the single string field, else every field
    but OpenEnv's bookkeeping as compact JSON (the policy still sees all the server said)."""
    if field is not None:
        value = observation.get(field, "")
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if isinstance(observation.get(PROMPT_FIELD), str):
        return observation[PROMPT_FIELD]
    shown = {k: v for k, v in observation.items() if k not in BOOKKEEPING}
    strings = [v for v in shown.values() if isinstance(v, str)]
    if len(strings) == 1 and len(shown) == 1:
        return strings[0]
    return json.dumps(shown, sort_keys=True, ensure_ascii=False)


def check_observation_field(schema: Mapping[str, Any], field: str | None, url: str) -> None:
    """``observation_field`` must name a field of the server's observation."""
    props = schema.get("properties")
    if field is not None and isinstance(props, Mapping) and field not in props:
        shown = ", ".join(sorted(k for k in props if k not in BOOKKEEPING))
        raise SchemaError(f"observation_field '{field}' is no field of the observation of "
                          f"{url}; it has {shown}")
