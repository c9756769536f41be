"""Served sandboxed envs, against the real Docker engine: code graded on the server, and tool
episodes (``grpo/MathPython-v0``) playing their turns over one WebSocket session."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason='pip install -e ".[openenv]"')

from openenv.core.generic_client import GenericEnvClient  # noqa: E402

import envs  # noqa: E402,F401
from envs.tools.serve.side_by_side import (  # noqa: E402
    SERVED,
    TOOL_CALL,
    mixed_cases,
    play,
    reference,
    replay_kwargs,
)
from tests.openenv_serve_helpers import served  # noqa: E402

pytestmark = pytest.mark.docker
TOOL_ENV = "grpo/MathPython-v0"


@pytest.mark.parametrize("env_id", ["grpo/CodeTests-v0", TOOL_ENV])
def test_generic_client_rewards_equal_score_on_the_sandboxed_envs(env_id):
    kwargs = SERVED[env_id]
    env = gym.make(env_id, **kwargs).unwrapped
    try:
        cases = mixed_cases(env, env_id, kwargs, 10)
        with served(env_id, replay_kwargs(env_id)) as url, \
                GenericEnvClient(base_url=url) as client:
            got = [play(client, case)[0] for case in cases]
        want = [reference(env, case) for case in cases]
    finally:
        env.close()
    assert got == want
    assert len(set(want)) > 1 and max(want) > 0  # golds pass, the rest mostly not


def test_a_tool_episode_plays_its_turns_over_one_session():
    kwargs = SERVED[TOOL_ENV]
    with served(TOOL_ENV, kwargs) as url, GenericEnvClient(base_url=url) as client:
        first = client.reset(seed=2)
        assert "```python" in first.observation["prompt"]  # the tool's instructions
        episode = client.state()["episode_id"]
        turn = client.step({"completion": TOOL_CALL})
        obs = turn.observation
        assert not turn.done and turn.reward == 0.0
        assert "42" in obs["tool_output"] and obs["prompt"] == obs["tool_output"]
        assert obs["tool_status"] == "ok" and obs["rewards"] == {}
        state = client.state()
        assert state["episode_id"] == episode and state["step_count"] == 1
        task_id = obs["task_id"]
        answer = client.step({"completion": "So the answer is \\boxed{-1}."})
        assert answer.done and answer.observation["prompt"] == ""
        assert answer.observation["reason"] is not None and answer.observation["task_id"] == task_id
        assert client.state()["step_count"] == 2
