"""The card as text (one table per card), as JSON, and as the README's Markdown table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs.tools.card.card import Card
from envs.tools.card.checks import Result

#: The README's generated section lies between these markers.
START, END = "<!-- card:start -->", "<!-- card:end -->"
#: Markdown columns that measure time: the README test leaves them out of its comparison.
LATENCY_COLUMNS = ("p50 s", "p99 s")


def describe(result: Result) -> str:
    """A check's result in a few words."""
    m, cid = result.metrics, result.check.id
    if not m.get("n"):
        return "nothing to grade"
    if cid == "semantic.oracle_max":
        return f"{m['at_max']:.0%} of {m['n']} golds at max, mean {m['mean']:.3f}"
    if cid in ("semantic.floor_gap", "semantic.canary_floor"):
        return (f"worst {m['worst']}: mean {m['mean']:.3f}, max {m['max']:.3f}, "
                f"passed {m['passed']:.0%} of {m['n']}")
    if cid == "semantic.verifier_determinism":
        return f"{m['agree']:.0%} of {m['n']} regraded agree"
    if cid == "statistical.adversarial_floor":
        return (f"best kind {m['top']} {m['policy']:.3f}; best per task: mean {m['mean']:.3f}, "
                f"max {m['max']:.3f}, passed {m['passed']:.0%} of {m['n']} tasks "
                f"({m['completions']} kinds)")
    if cid == "statistical.gameability_gap":
        return (f"{m['paid']} of {m['n']} paid, mean {m['mean']:.3f}, max {m['max']:.3f}, "
                f"gap {m['gap']:.3f}")
    if cid == "statistical.reward_search":
        return (f"{m['paid']} paid wrong in {m['n']} queries over {m['tasks']} tasks, best "
                f"wrong {m['best_wrong']:.3f} ({m['correct']} correct found)")
    if cid == "grpo.tpr_tnr":
        return (f"TPR {m['tpr']:.0%} of {m['golds']} golds; TNR {m['tnr']:.1%} of "
                f"{m['negatives']} ({m['shallow']} shallow, {m['mutants']} mutants)")
    if cid == "grpo.honest_precision":
        return f"{m['precision']:.1%} of {m['n']} credited"
    if cid == "grpo.grading_latency":
        return f"p50 {m['p50_s'] * 1000:.1f} ms, p99 {m['p99_s'] * 1000:.1f} ms ({m['n']})"
    if cid == "grpo.infra_error_rate":
        return f"{m['rate']:.1%} of {m['n']}, {m['errors']} raised"
    return str(m)


def text(card: Card) -> str:
    size = "unbounded" if card.split_size is None else str(card.split_size)
    head = (f"{card.env_id}  pack {card.pack} {card.pack_version}  split {card.split}: "
            f"{card.n_tasks} of {size} tasks (seed {card.seed}{', fast' if card.fast else ''})"
            f"\n  rewards are fractions of the maximum ({card.max_reward:g}): the whole reward for "
            f"the oracle, its {' + '.join(card.skill)} part for the other checks")
    rows = [("check", "ours", "result", "threshold", "status")]
    for r in card.results:
        rows.append((r.check.id, r.check.ours, describe(r), r.threshold, r.status))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [head]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
                     + "  " + row[4])
    for r in card.results:
        if r.note:
            lines.append(f"  note {r.check.id}: {r.note}")
    lines.append(card.summary())
    return "\n".join(lines)


def _cell(card: Card, check_id: str, fmt: str) -> str:
    r = card.result(check_id)
    if r.status == "n/a":
        return "n/a"
    mark = "" if r.status == "pass" else " **fail**"
    return fmt.format(**r.metrics) + mark


MARKDOWN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("gold at max", "semantic.oracle_max", "{at_max:.0%}"),
    ("do-nothing", "semantic.floor_gap", "{mean:.2f}"),
    ("canary", "semantic.canary_floor", "{mean:.2f}"),
    ("deterministic", "semantic.verifier_determinism", "{agree:.0%}"),
    ("shallow kind / per task / max", "statistical.adversarial_floor",
     "{policy:.2f} / {mean:.2f} / {max:.2f}"),
    ("hacks paid", "statistical.gameability_gap", "{paid} of {n}"),
    ("TPR / TNR", "grpo.tpr_tnr", "{tpr:.0%} / {tnr:.0%}"),
    ("honest credited", "grpo.honest_precision", "{precision:.1%} of {n}"),
    ("infra errors", "grpo.infra_error_rate", "{rate:.1%}"),
    ("p50 s", "grpo.grading_latency", "{p50_s:.3f}"),
    ("p99 s", "grpo.grading_latency", "{p99_s:.3f}"),
)


def markdown(cards: Sequence[Card]) -> str:
    """One row per card: each check's headline number (rewards as fractions of the maximum),
    **fail** beside a check that misses its threshold."""
    header = ["env", "pack", "tasks", *(c[0] for c in MARKDOWN_COLUMNS), "checks passed"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for card in cards:
        passed = sum(r.status == "pass" for r in card.results)
        counted = sum(r.status != "n/a" for r in card.results)
        cells = [f"`{card.env_id}`", card.pack, str(card.n_tasks),
                 *(_cell(card, cid, fmt) for _, cid, fmt in MARKDOWN_COLUMNS),
                 f"{passed} of {counted}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def without_columns(table: str, names: Sequence[str] = LATENCY_COLUMNS) -> str:
    """``table`` (Markdown) with the named columns removed: what the README test compares."""
    rows = [row.strip().strip("|").split(" | ") for row in table.strip().splitlines()]
    if not rows:
        return ""
    header = [c.strip() for c in rows[0]]
    drop = {i for i, c in enumerate(header) if c in names}
    return "\n".join(" | ".join(c.strip() for i, c in enumerate(row) if i not in drop)
                     for row in rows)


def section(text_between: str) -> str:
    return f"{START}\n{text_between}\n{END}"


def readme_section(readme: str) -> str | None:
    """The text between the README's markers, or None when it has none."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        return None
    return readme[start + len(START):end].strip("\n")


def with_section(readme: str, table: str) -> str:
    """``readme`` with its marked section replaced by ``table``."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {START} ... {END} section")
    return readme[:start] + section(table) + readme[end + len(END):]


def as_json(cards: Sequence[Card]) -> list[dict[str, Any]]:
    return [card.to_json() for card in cards]
