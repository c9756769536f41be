"""``python -m learner.run``: GRPO training of a causal LM on any grpo/* env.

Bad flags, unknown env ids and unloadable models fail before any work starts, with a message.
"""

from __future__ import annotations

import sys

# Only light modules at import time: flags are parsed and checked before torch loads.
from learner.config import parse_config
from learner.results import train_and_show


def main(argv: list[str] | None = None) -> int:
    """Train; at the end, a few credited samples, held-out answers and ``plots/``."""
    return train_and_show(parse_config(argv))


if __name__ == "__main__":
    sys.exit(main())
