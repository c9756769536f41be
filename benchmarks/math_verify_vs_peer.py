"""Side-by-side: envs.verify.math vs math-verify on the equivalence corpus (the copy in tests/data).

Both checkers grade every row sequentially from one thread, gold and pred as given in
the corpus (the pred is the completion). math-verify runs as its README shows:
``verify(parse(gold), parse(pred))`` with default extraction configs and its own
(signal-based) timeouts. Our cache is cleared before every timed pass, so a pass only
benefits from pairs repeated *within* the corpus (reported as cache hits). Worker start
and imports happen in an untimed warm-up call for both sides.

    python benchmarks/math_verify_vs_peer.py [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "data" / "math_equivalence_cases.jsonl"  # provenance: tests/data


def _ours(rows: list[dict], passes: int) -> tuple[int, list[float], dict[str, int]]:
    from envs.verify import math as ours

    ours.verify("1", r"\boxed{1}")
    ours.verify("x^2", r"x \cdot x")  # starts a worker: untimed
    rates: list[float] = []
    correct = 0
    info: dict[str, int] = {}
    for k in range(passes):
        ours.clear_cache()
        t0 = time.perf_counter()
        verdicts = [ours.verify(r["gold"], r["pred"]) for r in rows]
        rates.append(len(rows) / (time.perf_counter() - t0))
        if k == 0:
            correct = sum(v.passed == r["expected"] for v, r in zip(verdicts, rows, strict=False))
            info = ours.cache_info()
    return correct, rates, info


def _peer(rows: list[dict], passes: int) -> tuple[int, list[float]]:
    from math_verify import parse, verify

    verify(parse("$1$"), parse("$1$"))
    rates: list[float] = []
    correct = 0
    for k in range(passes):
        t0 = time.perf_counter()
        results = []
        for r in rows:
            try:
                results.append(bool(verify(parse(r["gold"]), parse(r["pred"]))))
            except Exception:
                results.append(False)
        rates.append(len(rows) / (time.perf_counter() - t0))
        if k == 0:
            correct = sum(ok == r["expected"] for ok, r in zip(results, rows, strict=False))
    return correct, rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    if not CORPUS.is_file():
        sys.exit(f"corpus not found: {CORPUS}")
    rows = [json.loads(line) for line in CORPUS.open() if line.strip()]
    n = len(rows)
    observed = sum(r["observed_math_verify_0_8_0"] == r["expected"] for r in rows)

    ours_ok, ours_rates, info = _ours(rows, args.passes)
    peer_ok, peer_rates = _peer(rows, args.passes)
    ours_rate, peer_rate = statistics.median(ours_rates), statistics.median(peer_rates)

    print(f"corpus: {n} rows, {args.passes} timed passes each (median reported)")
    print(
        "caching: our cache cleared before each pass; within-pass repeats hit it "
        f"({info.get('hits', 0)} hits / {info.get('misses', 0)} worker checks in pass 1; "
        "the rest took parent fast paths)"
    )
    print(f"{'checker':<28}{'accuracy':>16}{'verdicts/s':>14}")
    print(f"{'envs.verify.math':<28}{f'{ours_ok}/{n}':>16}{ours_rate:>14.1f}")
    print(f"{'math-verify (defaults)':<28}{f'{peer_ok}/{n}':>16}{peer_rate:>14.1f}")
    print(
        f"{'math-verify 0.8.0 observed':<28}{f'{observed}/{n}':>16}  (per-row configs, from corpus)"
    )
    print(f"throughput ratio (ours / math-verify): {ours_rate / peer_rate:.2f}x")
    print(
        "per-pass verdicts/s: ours "
        + ", ".join(f"{r:.1f}" for r in ours_rates)
        + " | math-verify "
        + ", ".join(f"{r:.1f}" for r in peer_rates)
    )


if __name__ == "__main__":
    main()
