"""``python -m learner.demo`` (``make demo``): a short GRPO run of the embedded SmolLM2-135M-Instruct
on single-digit addition (``arith`` level 1), printing held-out greedy accuracy before and after.

Only answers in ``\\boxed{}`` count (``require_boxed``), as the prompt asks: the model often gets
the sum right but almost never boxes it, so it starts near 0% and GRPO has to learn both.

It takes roughly 10-15 minutes on two CPU cores. Extra flags are passed to ``learner.run``
(e.g. ``--steps 10`` for a quicker look, ``--output-dir DIR``).
"""

from __future__ import annotations

import sys

from learner import run

DEMO_FLAGS = [
    "--env", "grpo/MathExact-v0",
    "--env-kwargs", '{"pack": "arith", "level": 1, "require_boxed": true}',
    "--output-dir", "runs/demo",
    "--steps", "20",
    "--prompts-per-step", "4",
    "--group-size", "8",
    "--max-new-tokens", "48",
    "--learning-rate", "2e-5",
    "--beta", "0.04",
    "--eval-every", "0",
    "--no-eval-perturbations",  # the demo shows accuracy; learner.eval has the full gates
    "--samples-every", "5",
]


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    print("GRPO demo: SmolLM2-135M-Instruct on single-digit addition (arith level 1), "
          "boxed answers only")
    return run.main(DEMO_FLAGS + extra)  # later flags override the demo's


if __name__ == "__main__":
    sys.exit(main())
