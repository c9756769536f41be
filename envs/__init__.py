"""grpo-gym environments. Importing this package registers every grpo/* env with gymnasium."""

from envs.base import EpisodeError, TaskEnv
from envs.episode import Episode
from envs.registration import env_sources, register, register_all
from envs.verify.verdict import Verdict

register_all()

__all__ = ["Episode", "EpisodeError", "TaskEnv", "Verdict", "env_sources", "register"]
