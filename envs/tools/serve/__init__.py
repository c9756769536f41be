"""grpo-gym envs served over OpenEnv (``python -m envs serve``): the wire types, the OpenEnv
``Environment`` wrapping a grpo-gym env, the app and the ``openenv.yaml`` manifest.

This package imports ``openenv`` (the optional ``openenv`` extra); nothing in the core imports
it, so ``import envs`` and ``python -m envs list`` work without the extra.
"""

from envs.extras import require

# The package's modules import openenv: without the extra, one line that says how to get it.
require("openenv.core", "openenv", "serving an env over OpenEnv (envs.tools.serve)")
