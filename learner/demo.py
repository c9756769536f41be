"""``python -m learner.demo`` (``make demo``): a short GRPO run of the embedded SmolLM2-135M-Instruct
on single-digit addition (``arith`` level 1), printing held-out greedy accuracy before and after.

Only a number in ``\\boxed{}`` counts (``require_boxed`` and the pack's ``answer = "number"``), as
the prompt asks: the model often gets the sum right but rarely boxes it, so it starts at 0% and
GRPO has to learn both. Boxing the question (``\\boxed{2 + 6}``), which once earned full marks,
now earns nothing (``restates_question``).

What makes its learning hold across seeds: the pack's instruction shows the format once ("for
example: The answer is \\boxed{42}", a number no single-digit sum can be), sampling is at
temperature 0.7, and only a right answer pays (the env's ``format`` reward weighted 0). With the
bare instruction the starting model boxed 1-2% of its samples, so whether a step had a group
with a reward spread, and when the box was learned, was down to the seed (held-out results of
45-86% for one configuration); at 1.0 even a boxed sum is rarely right (2% of samples). With
the example it boxes about a quarter of its samples at 0.7 from the first step (4% right). With
the format reward on, one seed's policy collapsed onto copying the example (``\\boxed{42}``
everywhere, paid by the format reward alone), so it is off. ``--beta 0`` (DAPO's choice) and
32 new tokens keep a run within minutes; see the README for the results over seeds.

It takes about 4 minutes on two CPU cores (6 with one thread) and ends by printing completions
the reward credited, held-out passes and misses, the reward-hack monitor's flagged share and
where its plots are. Extra flags are passed to
``learner.run``'s (e.g. ``--steps 10`` for a quicker look, ``--output-dir DIR``).

Every demo starts afresh: it passes ``--overwrite``, so running it again (with more steps or
not) replaces the earlier demo run in its folder, and says so, instead of mixing two runs in one
folder. Give ``--output-dir DIR`` to keep an earlier run, or ``--resume --steps N`` to train
the run in the folder further (``--resume`` takes the place of ``--overwrite``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from learner.config import parse_config
from learner.results import (  # noqa: F401 - the demo's names for them
    credited_samples,
    heldout_answers,
    show_results,
    train_and_show,
)

DEMO_FLAGS = [
    "--env", "grpo/MathExact-v0",
    # No format reward: a shaping term that pays any boxed number pays a copy of the prompt's
    # example (\boxed{42}) too, and one seed's policy collapsed onto it.
    "--env-kwargs",
    '{"pack": "arith", "level": 1, "require_boxed": true, "reward_weights": {"format": 0}}',
    "--output-dir", "runs/demo",
    "--steps", "16",
    "--prompts-per-step", "4",
    "--group-size", "8",
    "--max-new-tokens", "32",
    "--learning-rate", "2e-5",
    "--temperature", "0.7",
    "--beta", "0",
    "--eval-every", "0",
    "--no-eval-perturbations",  # the demo shows accuracy; learner.eval has the full gates
    "--samples-every", "5",
]


def demo_help() -> str:
    """``--help``: the settings the demo runs with, not ``learner.run``'s defaults, which it
    replaces (``learner.run --help`` lists every flag, and any of them may be added)."""
    lines: list[str] = []
    for item in [*DEMO_FLAGS, "--overwrite"]:
        if item.startswith("--") or not lines:
            lines.append(item)
        else:  # the value of the flag before it
            lines[-1] += f" {item!r}" if " " in item else f" {item}"
    settings = "\n".join(f"  {line}" for line in lines)
    return ("usage: python -m learner.demo [learner.run flags]\n\n"
            "A short GRPO run of the embedded SmolLM2-135M-Instruct on single-digit addition\n"
            "(arith level 1), answers as numbers in \\boxed{}: held-out accuracy before and after.\n\n"
            f"The demo's settings (learner.run flags; a flag given here wins):\n{settings}\n\n"
            "--resume takes the place of --overwrite; 'python -m learner.run --help' lists every\n"
            "other flag.\n")


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    if "-h" in extra or "--help" in extra:
        print(demo_help(), end="")
        return 0
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
    return train_and_show(config)


if __name__ == "__main__":
    sys.exit(main())
