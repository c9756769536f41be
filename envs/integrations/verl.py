"""``envs.integrations.verl``: the documented import path of ``envs.tools.integrations.verl`` (the same module)."""

import sys

from envs.tools.integrations import verl as _module

sys.modules[__name__] = _module
