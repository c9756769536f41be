"""The public import path of the TRL and verl integrations (``envs.integrations.trl``,
``.trl_openenv``, ``.verl``); the code lives in ``envs/tools/integrations/``."""
