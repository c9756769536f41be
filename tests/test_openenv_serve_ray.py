"""One served env whose code grading goes to the Ray backend (``--ray-address``), on Ray's own
two-node test cluster on this machine, against the real Docker engine."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason='pip install -e ".[openenv]"')
pytest.importorskip("ray", reason="pip install -e '.[ray]'")

import ray  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import envs  # noqa: E402,F401
from envs.tools.serve.app import build_app  # noqa: E402
from envs.tools.serve.side_by_side import Case, play, reference  # noqa: E402
from tests.openenv_serve_helpers import served  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]
NODE = dict(num_cpus=1, resources={"docker": 1}, object_store_memory=100 << 20)
CODE = "grpo/CodeTests-v0"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    c.add_node(**NODE)
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


def test_a_server_grading_on_the_ray_cluster_equals_local_grading(cluster):
    kwargs = {"pack": "humaneval"}
    env = gym.make(CODE, **kwargs).unwrapped
    try:
        tasks = [env.pack.task_at("test", i) for i in range(2)]
        cases = [Case("gold", t.id, (env.gold_completion(t),)) for t in tasks]
        cases += [Case("wrong", t.id, (text,)) for t in tasks
                  for text in ("```python\ndef f(:\n```", "print('hi')")]
        want = [reference(env, case) for case in cases]
    finally:
        env.close()
    with served(CODE, {**kwargs, "split": "test"}, ray_address=cluster.address) as url, \
            GenericEnvClient(base_url=url) as client:
        got = [play(client, case)[0] for case in cases]
    assert got == want and want[:2] == [max(want)] * 2 and max(want) > 0
    assert all(ray.nodes())  # the cluster is still up: the server only closed its actors


def test_the_ray_backend_grades_on_both_nodes(cluster):
    app = build_app(CODE, {"pack": "humaneval"}, ray_address=cluster.address)
    served_env = app.state.served
    try:
        assert len(served_env.remote.scorer.nodes()) == 2
    finally:
        served_env.close()
