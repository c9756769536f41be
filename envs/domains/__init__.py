"""Each domain's env (a ``TaskEnv`` subclass), with the learner's recipe for it as data
(``<env>.toml``) beside it. Registered by ``envs.registration``."""
