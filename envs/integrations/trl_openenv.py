"""``envs.integrations.trl_openenv``: the documented import path of ``envs.tools.integrations.trl_openenv`` (the same module)."""

import sys

from envs.tools.integrations import trl_openenv as _module

sys.modules[__name__] = _module
