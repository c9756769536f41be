"""``python -m learner.demo`` (``make demo``): a short GRPO run of the embedded SmolLM2-135M-Instruct
on single-digit addition (``arith`` level 1), printing held-out greedy accuracy before and after.

Only a number in ``\\boxed{}`` counts (``require_boxed`` and the pack's ``answer = "number"``), as
the prompt asks: the model often gets the sum right but almost never boxes it, so it starts at
0% and GRPO has to learn both. Boxing the question (``\\boxed{2 + 6}``), which once earned full
marks, now earns only the small format reward. Sampling at temperature 1.0 matters: at 0.7 the
starting model boxed 0.8% of its samples and most steps had no group with a reward spread, so
nothing to learn from; at 1.0 it boxes 2% and about half the steps have one from the start.

It takes about 5 minutes on two CPU cores and ends by printing two completions the reward
credited and the reward-hack monitor's flagged share. Extra flags are passed to
``learner.run``'s (e.g. ``--steps 10`` for a quicker look, ``--output-dir DIR``).

Every demo starts afresh: it passes ``--overwrite``, so running it again (with more steps or
not) replaces the earlier demo run in its folder, and says so, instead of mixing two runs in one
folder. Give ``--output-dir DIR`` to keep an earlier run, or ``--resume --steps N`` to train
the run in the folder further (``--resume`` takes the place of ``--overwrite``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from learner.config import parse_config
from learner.launch import train

DEMO_FLAGS = [
    "--env", "grpo/MathExact-v0",
    "--env-kwargs", '{"pack": "arith", "level": 1, "require_boxed": true}',
    "--output-dir", "runs/demo",
    "--steps", "20",
    "--prompts-per-step", "4",
    "--group-size", "8",
    "--max-new-tokens", "48",
    "--learning-rate", "2e-5",
    "--temperature", "1.0",
    "--beta", "0.04",
    "--eval-every", "0",
    "--no-eval-perturbations",  # the demo shows accuracy; learner.eval has the full gates
    "--samples-every", "5",
]


def credited_samples(output_dir: str | Path, n: int = 2) -> list[tuple[int, str, str]]:
    """Up to ``n`` distinct credited completions ``(step, prompt, completion)`` from the latest
    step that has any in ``samples.jsonl``: what the reward actually paid for."""
    path = Path(output_dir) / "samples.jsonl"
    if not path.is_file():
        return []
    by_step: dict[int, list[tuple[int, str, str]]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                group = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill
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
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a kill
    if not rows:
        return []
    last = [r for r in rows if r["step"] == max(r["step"] for r in rows)]
    picked = [r for r in last if r["passed"]][:n] + [r for r in last if not r["passed"]][:n]
    return [(bool(r["passed"]), r.get("prompt", r["task_id"]), r["completion"]) for r in picked]


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


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    # A fresh run each time, unless asked to continue one (later flags override the demo's).
    fresh = [] if "--resume" in extra else ["--overwrite"]
    flags = DEMO_FLAGS + fresh + extra
    print("GRPO demo: SmolLM2-135M-Instruct on single-digit addition (arith level 1), "
          "answers as numbers in \\boxed{}")
    config = parse_config(flags)
    out = Path(config.output_dir)
    if config.overwrite and out.is_dir() and any(out.iterdir()):
        print(f"the demo starts afresh (--overwrite): the earlier run in {out} is replaced; "
              "pass --output-dir DIR to keep it")
    code = train(config)
    if code == 0:
        show_results(config.output_dir)
    return code


if __name__ == "__main__":
    sys.exit(main())
