"""``envs.integrations.trl``: the documented import path of ``envs.tools.integrations.trl`` (the same module)."""

import sys

from envs.tools.integrations import trl as _module
from envs.tools.integrations.trl import *  # noqa: F403  (its names here too: a file loaded by path, as verl does)

sys.modules[__name__] = _module
