"""Throughput of the JSON gate against a bare compiled ``jsonschema`` validator, same inputs.

Inputs: answers to ``extract`` tasks of all families and levels as pure-JSON text (what a
well-trained policy emits), one in five made schema-invalid (a required field removed or a
value of the wrong type). Both sides do their full work on every input:

- raw: ``list(validator.iter_errors(data))`` with the validator compiled before the clock
  starts (format assertion on) and the data parsed before it starts;
- gate: ``envs.verify.json.verify(schema, text)`` on the text: size and depth limits, parsing
  with duplicate-key and NaN checks, validator lookup, validation and error collection.

The two sides alternate over small chunks of inputs, timed in process CPU time, so other work on
a shared machine weighs on both alike. Run: ``python benchmarks/json_gate.py [--tasks N]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable
from typing import Any

from envs.verify.json import compiled_validator, verify
from tasks import load_pack


def _inputs(n: int) -> list[tuple[dict[str, Any], str, Any]]:
    pack = load_pack("extract")
    out = []
    for i in range(n):
        task = pack.task_at("train", i)
        schema, value = task["schema"], copy.deepcopy(task["expected"])
        if i % 5 == 4:  # the invalid fifth: alternately a missing field and a wrong type
            key = next(iter(value))
            if i % 10 == 4:
                del value[key]
            else:
                value[key] = 12345
        text = json.dumps(value)
        out.append((schema, text, json.loads(text)))
    return out


def _timed(fn: Callable[[list], None], chunk: list) -> float:
    start = time.process_time()
    fn(chunk)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=400, help="distinct inputs")
    parser.add_argument("--rounds", type=int, default=20, help="passes over the inputs")
    parser.add_argument("--chunk", type=int, default=10, help="inputs per timed chunk")
    args = parser.parse_args()

    # Each input carries its validator, compiled beforehand, for the raw side.
    inputs = [(*item, compiled_validator(item[0])) for item in _inputs(args.tasks)]
    for schema, text, data, validator in inputs:  # warm-up; both sides must agree on each input
        raw_valid = not list(validator.iter_errors(data))
        if verify(schema, text).details["valid"] != raw_valid:
            raise SystemExit(f"gate and raw validator disagree on {text[:80]}")

    def raw(chunk: list) -> None:
        for _, _, data, validator in chunk:
            list(validator.iter_errors(data))

    def gate(chunk: list) -> None:
        for schema, text, _, _ in chunk:
            verify(schema, text)

    # Small chunks, alternating which side goes first, so a burst of load from other processes
    # lands on both sides alike; each side's rate is its inputs over its summed CPU time.
    chunks = [inputs[i : i + args.chunk] for i in range(0, len(inputs), args.chunk)]
    raw_s = gate_s = 0.0
    for r in range(args.rounds):
        for k, chunk in enumerate(chunks):
            if (r + k) % 2:
                raw_s += _timed(raw, chunk)
                gate_s += _timed(gate, chunk)
            else:
                gate_s += _timed(gate, chunk)
                raw_s += _timed(raw, chunk)
    done = args.rounds * len(inputs)
    raw_best, gate_best = done / raw_s, done / gate_s
    invalid = sum(1 for i in range(len(inputs)) if i % 5 == 4)
    print(f"inputs: {len(inputs)} extract answers ({invalid} invalid), "
          f"{args.rounds} passes, timed in alternating chunks of {args.chunk}")
    print(f"raw compiled validator : {raw_best:10,.0f} validations/s")
    print(f"gate verify()          : {gate_best:10,.0f} validations/s")
    print(f"ratio gate/raw         : {gate_best / raw_best:10.2f}x  (goal >= 0.80x)")


if __name__ == "__main__":
    main()
