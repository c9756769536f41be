"""The env and the Ray scorer a run grades with, made from flags in one place (training,
held-out evaluation and ``python -m learner.eval`` all take them from here); a flag that cannot
be honoured is a ``SetupError`` with one line.

Torch-free: a misspelled env id or pack answers before the model loads.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from learner.config import Config

if TYPE_CHECKING:
    from envs.contract import LearnerEnv
    from envs.ray_scoring import RayScorer


class SetupError(RuntimeError):
    """The env, the cluster or the model cannot be set up as the flags ask; one line says why."""


def _env_name(env_id: str) -> str:
    """``grpo/MathExact-v0`` -> ``MathExact``."""
    return re.sub(r"^[^/]*/|-v\d+$", "", env_id)


def make_env(config: Config) -> LearnerEnv:
    """The env's unwrapped TaskEnv; unknown ids and bad kwargs fail with a clear message."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the grpo/* envs)
    from envs.base import make_task_env

    if config.env not in gym.registry:
        ids = sorted(i for i in gym.registry if i.startswith("grpo/")) or sorted(gym.registry)
        # Compared without the shared "grpo/" and "-v0": on whole ids every env looked close.
        core = {_env_name(i): i for i in ids}
        close = difflib.get_close_matches(_env_name(config.env), list(core), n=1, cutoff=0.6)
        hint = f" Did you mean: {core[close[0]]}?" if close else ""
        raise SetupError(f"unknown env id '{config.env}'.{hint} Known: {', '.join(ids)}")
    kwargs = config.env_options()
    try:
        env = make_task_env(config.env, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any construction error is reported the same way
        raise SetupError(f"cannot create {config.env} with {kwargs}: {exc}") from exc
    if config.max_turns and int(getattr(env, "max_turns", 1) or 1) != config.max_turns:
        raise SetupError(f"{config.env} took max_turns={config.max_turns} but runs "
                         f"{getattr(env, 'max_turns', 1)} turn(s) per episode")
    return env


def ray_scorer(env: LearnerEnv, address: str | None) -> RayScorer | None:
    """Grading on the Ray cluster at ``address`` (``None``: local grading, returns None);
    a cluster that cannot be reached is a ``SetupError`` with one line."""
    if address is None:
        return None
    from envs.base import TaskEnv
    from envs.ray_scoring import RayScorer

    if not isinstance(env, TaskEnv):  # the nodes rebuild it from its gym id and kwargs
        raise SetupError(f"--ray-address grades a TaskEnv made with gym.make; "
                         f"{type(env).__name__} is not one")

    print(f"joining the Ray cluster at {address} and starting a grading actor per node...",
          flush=True)
    from sandbox.ray_cluster import RayUnavailable  # imports Ray, as RayScorer does

    try:
        scorer = RayScorer(env, address)
    except RayUnavailable as exc:
        raise SetupError(str(exc)) from exc
    hosts = sorted({n["hostname"] for n in scorer.nodes()})
    print(f"grading on {len(scorer.nodes())} Ray nodes ({', '.join(hosts)}), "
          f"{scorer.capacity} slots", flush=True)
    return scorer
