"""A scorer whose module takes 2 s to import, as a reasoning-gym dataset may take to build."""

from __future__ import annotations

import time
from typing import Any

time.sleep(2)


def pays(answer: str, entry: dict[str, Any]) -> float:
    return 1.0
