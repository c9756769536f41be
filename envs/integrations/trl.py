"""``envs.integrations.trl``: the documented import path of ``envs.tools.integrations.trl`` (the same module)."""

import sys

from envs.tools.integrations import trl as _module

sys.modules[__name__] = _module
