"""``envs.integrations.verl``: the documented import path of ``envs.tools.integrations.verl`` (the same module)."""

import sys

from envs.tools.integrations import verl as _module
from envs.tools.integrations.verl import *  # noqa: F403  (its names here too: a file loaded by path, as verl does)

sys.modules[__name__] = _module
