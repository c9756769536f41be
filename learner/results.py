"""What a finished run shows, ``learner.run`` and the demo alike: a few completions the reward
credited, held-out answers that passed and missed, and the plots (``plots/``).
"""

from __future__ import annotations

import os
from pathlib import Path

from learner.config import Config
from learner.launch import train
from learner.training.run_log import read_log


def train_and_show(config: Config) -> int:
    """Train (``learner.launch.train``); once the run has finished, show what it rewarded (on
    the main process of a multi-process launch only)."""
    code = train(config)
    if code == 0 and int(os.environ.get("RANK", "0")) == 0:
        show_results(config.output_dir)
    return code


def credited_samples(output_dir: str | Path, n: int = 2) -> list[tuple[int, str, str]]:
    """Up to ``n`` distinct credited completions ``(step, prompt, completion)`` from the latest
    step that has any in ``samples.jsonl``: what the reward actually paid for."""
    path = Path(output_dir) / "samples.jsonl"
    if not path.is_file():
        return []
    by_step: dict[int, list[tuple[int, str, str]]] = {}
    for group in read_log(path):
        for text, passed in zip(group["completions"], group.get("passed", []), strict=False):
            if passed:
                by_step.setdefault(group["step"], []).append(
                    (group["step"], group["prompt"], text))
    for step in sorted(by_step, reverse=True):
        seen, out = set(), []
        for sample in by_step[step]:
            if sample[2] not in seen:
                seen.add(sample[2])
                out.append(sample)
        return out[:n]
    return []


def heldout_answers(output_dir: str | Path, n: int = 3) -> list[tuple[bool, str, str]]:
    """Up to ``n`` passed and ``n`` failed greedy answers ``(passed, prompt, completion)`` of the
    last held-out evaluation in ``heldout.jsonl``: what the accuracy counted."""
    path = Path(output_dir) / "heldout.jsonl"
    if not path.is_file():
        return []
    rows = read_log(path)
    if not rows:
        return []
    last = [r for r in rows if r["step"] == max(r["step"] for r in rows)]
    # An infrastructure failure is a miss there, whatever its record claims.
    passed = [bool(r["passed"]) and not r.get("infra_error") for r in last]
    picked = ([(r, p) for r, p in zip(last, passed, strict=True) if p][:n]
              + [(r, p) for r, p in zip(last, passed, strict=True) if not p][:n])
    return [(p, r.get("prompt", r["task_id"]), r["completion"]) for r, p in picked]


def show_results(output_dir: str | Path) -> None:
    """What the reward credited, what the held-out accuracy counted, and the plots."""
    from learner.plot import plot  # matplotlib: only once the run is done

    shown = credited_samples(output_dir)
    print("what the reward credited (latest samples):" if shown else
          "no credited completion in the saved samples")
    for step, prompt, text in shown:
        print(f"  step {step}  {prompt.splitlines()[0]!r} -> {text.strip()!r}")
    answers = heldout_answers(output_dir)
    if answers:
        print("held-out answers (greedy, after training):")
    for passed, prompt, text in answers:
        print(f"  {'pass' if passed else 'miss'}  {prompt.splitlines()[0]!r} -> {text.strip()!r}")
    written = plot(output_dir)
    if written:
        print(f"plots: {written[0].parent}/ ({', '.join(p.stem for p in written)})")
