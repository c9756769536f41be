"""Verification on a real two-node Ray cluster on this machine (Ray's own test cluster: each node
is a raylet of its own, with one CPU and the ``docker`` resource), against the real engine.

Both nodes talk to the same Docker engine here; on a real cluster each node has its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import docker
import gymnasium as gym
import pytest

pytest.importorskip("ray", reason="pip install -e '.[ray]'")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import envs  # noqa: E402,F401
import sandbox  # noqa: E402
from envs.base import is_infra_error  # noqa: E402
from envs.ray_scoring import RayScorer  # noqa: E402
from learner.evaluation.heldout import heldout_tasks  # noqa: E402
from learner.sampling.scoring import score_all  # noqa: E402
from sandbox import Limits, Sandbox, ray_cluster  # noqa: E402
from sandbox.ray_cluster import HeadLost, connect, wait_any  # noqa: E402
from sandbox.worker import LABEL, OWNER_LABEL  # noqa: E402
from tests.polling import wait_until  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NODE = dict(num_cpus=1, resources={"docker": 1}, object_store_memory=100 << 20)
GONE_WITHIN_S = 60.0  # generous: the engine removes a dead actor's containers asynchronously


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    c.add_node(**NODE)
    c.wait_for_nodes()
    connect(c.address)  # as the learner joins: ships this checkout's packages
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def ray_sandbox(cluster):
    sb = Sandbox(backend="ray", ray_address=cluster.address, limits=Limits(wall_s=20))
    yield sb
    sb.close()


def owned_by(pids: set[int]) -> list[str]:
    """Sandbox containers whose owner process is one of ``pids`` (on this machine)."""
    client = docker.from_env()
    out = []
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        tag = (c.get("Labels") or {}).get(OWNER_LABEL, "")
        parts = tag.rsplit(":", 2)
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) in pids:
            out.append(c["Id"])
    return out


# -- Sandbox(backend="ray") ----------------------------------------------------------------
def test_ray_backend_keeps_the_run_api_with_a_pool_per_node(ray_sandbox, cluster):
    nodes = ray_sandbox.nodes()
    assert len({n["node_id"] for n in nodes}) == 2
    # The workers run this checkout's sandbox/ (shipped by Ray's py_modules, or found through
    # the driver's working directory on a cluster of this machine), not some installed copy.
    here = str(Path(sandbox.__file__).parent)
    assert all(n["code"] == here or "runtime_resources" in n["code"] for n in nodes), nodes
    assert ray_sandbox.pool_size == 2  # one per node: each node counts one CPU
    r = ray_sandbox.run("import sys; print(sys.stdin.read()[::-1]); open('f.txt').read()",
                        stdin="abc", files={"f.txt": "x"})
    assert (r.status, r.stdout) == ("ok", "cba\n")
    assert ray_sandbox.run("raise SystemExit(3)").status == "runtime_error"
    assert ray_sandbox.run("while True: pass", limits=Limits(wall_s=1, cpu_s=1)).status \
        == "timeout"
    with pytest.raises(ValueError, match="bad file name"):  # the caller's error, as locally
        ray_sandbox.run("pass", files={"../x": "y"})

    async def many():
        return await asyncio.gather(*(ray_sandbox.arun(f"print({i} * 3)") for i in range(8)))

    assert [r.stdout for r in asyncio.run(many())] == [f"{i * 3}\n" for i in range(8)]
    assert ray_sandbox.warm(60) >= 1


def test_a_killed_actor_mid_job_is_retried_elsewhere_and_leaves_no_container(ray_sandbox):
    victim = ray_sandbox.nodes()[0]
    results = []

    def job(i: int) -> None:
        results.append(ray_sandbox.run(f"import time; time.sleep(3); print({i})"))

    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    assert wait_until(lambda: owned_by({victim["pid"]}), 30)  # its pool is up and busy
    time.sleep(1)
    os.kill(victim["pid"], signal.SIGKILL)
    for t in threads:
        t.join(120)
    # Retried on the surviving actor (or on the replacement): every job ran to the end.
    assert sorted(r.stdout for r in results) == [f"{i}\n" for i in range(4)], results
    assert ray_sandbox.lost >= 1  # the kill hit a job in flight
    assert wait_until(lambda: not owned_by({victim["pid"]})), "containers left behind"
    # The node lives on, so its actor is replaced.
    assert wait_until(lambda: ray_sandbox.run("pass").ok and len(ray_sandbox.nodes()) == 2)
    assert ray_sandbox.run("print('after')").stdout == "after\n"


def test_closing_removes_every_container_on_every_node(cluster):
    sb = Sandbox(backend="ray", ray_address=cluster.address)
    pids = {n["pid"] for n in sb.nodes()}
    r = sb.run("print(1)")
    assert r.ok, r
    assert sb.warm(60) >= 1  # pools fill in the background (a used container is replaced)
    assert owned_by(pids), (pids, sb.nodes())
    sb.close()
    sb.close()  # idempotent
    assert wait_until(lambda: not owned_by(pids))
    assert sb.run("print(1)").status == "sandbox_error"


# -- grading on Ray: the same results as local grading --------------------------------------
CASES = {
    "grpo/MathExact-v0": ({"pack": "gsm8k"}, ["\\boxed{7}", "The answer is 18.", "no idea"]),
    "grpo/JsonSchema-v0": ({"level": 2}, ['{"name": 1}', "not json", "{}"]),
    "grpo/CodeTests-v0": ({}, ["```python\ndef f(:\n```", "```python\nimport os\nos._exit(0)\n```",
                               "print('hi')"]),
}


@pytest.mark.parametrize("env_id", list(CASES))
def test_ray_grading_equals_local_grading(cluster, env_id):
    kwargs, wrong = CASES[env_id]
    env = gym.make(env_id, **kwargs).unwrapped
    tasks = heldout_tasks(env, 4)
    completions = [env.gold_completion(t) for t in tasks] + wrong
    tasks = tasks + tasks[:len(wrong)]
    local = [env.score(t, c) for t, c in zip(tasks, completions, strict=True)]
    scorer = RayScorer(env, cluster.address)
    try:
        assert len(scorer.nodes()) == 2
        remote = scorer.score_many(tasks, completions)
        assert remote == local
        assert [r for r, _ in remote][:4] == [max(r for r, _ in local)] * 4  # golds pass
        assert pickle.loads(pickle.dumps(remote)) == remote
        scores = score_all(env, tasks, completions, scorer=scorer)
        assert scores.rewards == [r for r, _ in local] and not any(scores.infra_error)
        with pytest.raises(TypeError, match="a completion must be a str"):  # as env.score
            scorer.score_many(tasks[:1], [None])
    finally:
        scorer.close()


def test_a_sample_no_actor_could_grade_is_an_infrastructure_error(cluster):
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    scorer = RayScorer(env, cluster.address)
    scorer.close()  # every actor gone
    task = env.pack.task_at("test", 0)
    [(reward, info)] = scorer.score_many([task], [env.gold_completion(task)])
    assert reward == 0.0 and is_infra_error(info) and info["task_id"] == task.id
    assert score_all(env, [task], ["x"], scorer=scorer).infra_error == [True]


def test_a_head_that_stops_answering_ends_the_waits_instead_of_blocking(cluster, monkeypatch):
    """With the head gone, Ray's own calls block until its core worker ends the process, so
    every wait asks the head's port between polls (the real outage: tests/test_ray_outage.py)."""
    @ray.remote(num_cpus=0)
    def forever() -> None:
        time.sleep(600)

    ref = forever.remote()
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    scorer = RayScorer(env, cluster.address)
    actors = [m.actor for m in scorer._actors.members()]
    try:
        def refused(address: str, timeout: float = 5.0) -> None:
            raise ConnectionError(f"nothing answers at {address}")

        monkeypatch.setattr(ray_cluster, "probe", refused)
        with pytest.raises(HeadLost, match="head does not answer: nothing answers at"):
            wait_any([ref])
        scorer._actors.refresh(force=True)  # the nodes cannot be listed: every actor is dropped
        assert scorer._actors.members() == []
        task = env.pack.task_at("test", 0)
        [(reward, info)] = scorer.score_many([task], [env.gold_completion(task)])
        assert reward == 0.0 and is_infra_error(info)
    finally:
        monkeypatch.undo()
        ray.cancel(ref, force=True)
        scorer.close()
        for actor in actors:  # dropped unkilled (a real lost head cannot kill them)
            ray.kill(actor, no_restart=True)


# -- the command lines ----------------------------------------------------------------------
def test_learner_run_and_eval_grade_on_the_cluster(cluster, tmp_path, capsys):
    from learner import eval as learner_eval
    from learner import run
    from tests.learner_helpers import save_tiny

    model = save_tiny(tmp_path / "model")
    flags = ["--env", "grpo/MathExact-v0", "--env-kwargs", '{"pack": "arith", "level": 1}',
             "--model", str(model), "--ray-address", cluster.address]
    assert run.main([*flags, "--steps", "1", "--prompts-per-step", "2", "--group-size", "2",
                     "--max-new-tokens", "8", "--no-eval", "--no-progress",
                     "--output-dir", str(tmp_path / "run")]) == 0
    assert "grading on 2 Ray nodes" in capsys.readouterr().out
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert any("reward/mean" in m for m in metrics)
    assert learner_eval.main([*flags, "--limit", "2", "--group-size", "2", "--max-new-tokens",
                              "8", "--general-limit", "0", "--no-perturbations",
                              "--output-dir", str(tmp_path / "eval")]) == 0
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["metadata"]["n_tasks"] == 2


def test_doctor_reports_each_nodes_engine(cluster, capsys):
    from sandbox.__main__ import main

    assert main(["doctor", "--ray-address", cluster.address]) == 0
    out = capsys.readouterr().out
    assert "2 alive node(s), 2 verifying" in out
    assert out.count("Docker engine") == 2 and out.count("(verifies), host") == 2


# -- last: it changes the cluster --------------------------------------------------------
def test_a_node_killed_mid_grading_loses_no_sample_and_leaves_no_container(cluster):
    node = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    env = gym.make("grpo/CodeTests-v0").unwrapped
    task = env.pack.get("humaneval/0")
    slow_gold = env.gold_completion(task).replace("```\n", "import time\ntime.sleep(3)\n```\n")
    scorer = RayScorer(env, cluster.address)
    try:
        actors = {n["node_id"]: n["pid"] for n in scorer.nodes()}
        assert node.node_id in actors and len(actors) == 3
        out = {}
        worker = threading.Thread(
            target=lambda: out.update(r=scorer.score_many([task] * 6, [slow_gold] * 6)))
        worker.start()
        assert wait_until(lambda: owned_by({actors[node.node_id]}), 60)  # grading there
        time.sleep(1)
        cluster.remove_node(node, allow_graceful=False)
        worker.join(300)
        results = out["r"]
        assert scorer.lost >= 1  # the kill hit a chunk in flight
        # Every sample was graded again elsewhere (or, had none been left, marked as an
        # infrastructure error): none came back as a zero.
        for reward, info in results:
            assert (reward, info["passed"]) == (1.1, True) or is_infra_error(info), info
        assert sum(info["passed"] for _, info in results) >= 1
        assert wait_until(lambda: not owned_by({actors[node.node_id]})), \
            "containers of the dead node's actor left behind"
    finally:
        scorer.close()
    assert wait_until(lambda: not owned_by(set(actors.values())))
