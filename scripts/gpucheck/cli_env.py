"""``python -m scripts.gpucheck.cli_env ARGS``: ``python -m learner.run ARGS`` with the CLI
phase's env (``synthetic.BriefEnv``, a reward a random-init model earns) registered as
``gpucheck/Brief-v0``, so that every step of the phase updates and reports its train time."""

from __future__ import annotations

import sys


def register() -> str:
    """Register ``gpucheck/Brief-v0`` with gymnasium (once); its id."""
    import gymnasium as gym

    from scripts.gpucheck.synthetic import BRIEF_ENV_ID, BriefEnv

    if BRIEF_ENV_ID not in gym.registry:
        gym.register(BRIEF_ENV_ID, entry_point=BriefEnv)
    return BRIEF_ENV_ID


def main(argv: list[str]) -> int:
    from learner import run

    register()
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
