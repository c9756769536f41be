"""What checks and ships envs: the report card, ``validate``, the CLI (``python -m envs``),
the OpenEnv server (``serve``) and the TRL/verl integrations. Nothing in envs/ below imports it."""
