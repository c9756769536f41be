"""grpo-gym envs served over OpenEnv (``python -m envs serve``): the wire types, the OpenEnv
``Environment`` wrapping a grpo-gym env, the app and the ``openenv.yaml`` manifest.

This package imports ``openenv`` (the optional ``openenv`` extra); nothing in the core imports
it, so ``import envs`` and ``python -m envs list`` work without the extra.
"""
