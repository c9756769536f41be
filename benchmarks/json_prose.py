"""Seconds per MB of prose in the JSON gate, against plain ``json`` on the same text.

A completion that is not pure JSON is searched for a JSON value amid its prose. Inputs (ASCII,
so one character is one byte; every size is under the gate's ``max_chars``):

- ``brackets``: ``"a" + "{x" * n``, an opening bracket every other character;
- ``boxed``: ``"\\boxed{" * n``, LaTeX boxes that open and never close;
- ``keys``: ``"a" + '{"' * n``, a brace every other character, each of which could start an
  object (the most decode attempts a text can ask for);
- ``prose``: English sentences with a bracket or a brace now and then, then a JSON answer;
- ``quotes``: ``"[" * 65 + '\\"' * n``, deeper than ``max_depth`` allows and full of escaped
  quotes that never close a string (the depth check's string search).

Sides, each timed in process CPU time on the same text, alternating which goes first:

- gate: ``envs.verify.json.verify(schema, text)``, the whole gate (extraction, validation);
- scan: plain ``json``, used the obvious way: ``JSONDecoder().raw_decode`` at every opening
  bracket until one decodes. Each failure counts the line
  breaks before it, so this side grows with the square of the length: it runs up to
  ``--scan-max-mb`` only;
- floor: ``json.loads`` of a valid JSON document of the same size, what reading that many
  bytes costs at the least.

A linear search keeps the same seconds per MB at every size. Run:
``python benchmarks/json_prose.py [--sizes 0.125 0.25 0.5 1] [--scan-max-mb 0.25]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable

from envs.verify.json import MAX_CHARS, verify

MB = 1_000_000
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_SENTENCE = ("The order [see note 3] ships in {two} boxes; the customer, a regular, paid in "
             "full and asked for a receipt by email. ")
_OPENER = re.compile(r"[\[{]")


def brackets(size: int) -> str:
    return "a" + "{x" * ((size - 1) // 2)


def boxed(size: int) -> str:
    return "\\boxed{" * (size // len("\\boxed{"))


def keys(size: int) -> str:
    return "a" + '{"' * ((size - 1) // 2)


def prose(size: int) -> str:
    answer = ' Answer: {"name": "Ada"}'
    return (_SENTENCE * (size // len(_SENTENCE) + 1))[: size - len(answer)] + answer


def quotes(size: int) -> str:
    return "[" * 65 + '\\"' * ((size - 65) // 2)


KINDS: dict[str, Callable[[int], str]] = {"brackets": brackets, "boxed": boxed, "keys": keys,
                                          "prose": prose, "quotes": quotes}


def floor_document(size: int) -> str:
    """A valid JSON array of about ``size`` characters."""
    item = '{"name": "Ada", "n": [1, 2, 3]}, '
    return "[" + item * (size // len(item)) + "0]"


def stdlib_scan(text: str) -> object:
    """Plain ``json``: the first value ``raw_decode`` accepts at an opening bracket."""
    decoder = json.JSONDecoder()
    for match in _OPENER.finditer(text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except json.JSONDecodeError:
            continue
    return None


def _cpu_s(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each side, the order of sides rotating every repeat."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            times[name].append(_cpu_s(sides[name]))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0],
                        help="prose sizes in MB (at most the gate's max_chars)")
    parser.add_argument("--scan-max-mb", type=float, default=0.25,
                        help="largest size the quadratic plain-json scan runs on")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side (median)")
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=list(KINDS))
    args = parser.parse_args()

    print(f"{'input':<10} {'MB':>6} {'gate s/MB':>10} {'scan s/MB':>10} {'floor s/MB':>11}"
          f"  gate verdict")
    for kind in args.kinds:
        for mb in args.sizes:
            size = min(int(mb * MB), MAX_CHARS)
            text, document = KINDS[kind](size), floor_document(size)
            verdict = verify(SCHEMA, text)  # warm-up, and what the gate made of it
            sides: dict[str, Callable[[], object]] = {
                "gate": lambda text=text: verify(SCHEMA, text),
                "floor": lambda document=document: json.loads(document),
            }
            if mb <= args.scan_max_mb:
                sides["scan"] = lambda text=text: stdlib_scan(text)
            secs = measure(sides, args.repeats)
            per_mb = {name: s / (len(text) / MB) for name, s in secs.items()}
            per_mb["floor"] = secs["floor"] / (len(document) / MB)
            scan = f"{per_mb['scan']:10.3f}" if "scan" in per_mb else f"{'-':>10}"
            print(f"{kind:<10} {len(text) / MB:6.3f} {per_mb['gate']:10.3f} {scan} "
                  f"{per_mb['floor']:11.4f}  {verdict.reason}")


if __name__ == "__main__":
    main()
