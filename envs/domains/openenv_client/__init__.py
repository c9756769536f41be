"""grpo/OpenEnv-v0: any OpenEnv server as a grpo-gym env (``envs.domains.openenv_client.env``).

Importing this package loads nothing of ``openenv``: the env needs the optional extra only
when it is made."""
