"""``envs.integrations.trl_openenv``: the documented import path of ``envs.tools.integrations.trl_openenv`` (the same module)."""

import sys

from envs.tools.integrations import trl_openenv as _module
from envs.tools.integrations.trl_openenv import *  # noqa: F403  (its names here too: a file loaded by path, as verl does)

sys.modules[__name__] = _module
