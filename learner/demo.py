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


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    flags = DEMO_FLAGS + extra  # later flags override the demo's
    print("GRPO demo: SmolLM2-135M-Instruct on single-digit addition (arith level 1), "
          "answers as numbers in \\boxed{}")
    config = parse_config(flags)
    code = train(config)
    if code == 0:
        shown = credited_samples(config.output_dir)
        print("what the reward credited (latest samples):" if shown else
              "no credited completion in the saved samples")
        for step, prompt, text in shown:
            question = prompt.splitlines()[0]
            print(f"  step {step}  {question!r} -> {text.strip()!r}")
    return code


if __name__ == "__main__":
    sys.exit(main())
