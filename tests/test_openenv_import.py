"""grpo/OpenEnv-v0 against servers we did not write: the echo env ``openenv init`` makes from the
installed package's own template, served by ``python -m uvicorn server.app:app`` from its
folder, and our own exported env (``python -m envs serve``), round-tripped."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

import envs  # noqa: E402, F401 - registers the envs
from envs.base import is_infra_error  # noqa: E402
from envs.domains.openenv_client import session as session_module  # noqa: E402
from envs.domains.openenv_client.schema import SchemaError, action_field  # noqa: E402
from envs.domains.openenv_client.server import ServerStartError  # noqa: E402
from tests import learner_helpers as h  # noqa: E402
from tests.polling import alive, free_port  # noqa: E402

ENV_ID = "grpo/OpenEnv-v0"
ROOT = Path(__file__).resolve().parents[1]
#: The template serves one WebSocket session at a time and says to raise it for more; the
#: learner runs P x G episodes at once, each holding a session.
SESSIONS = 8


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory) -> Path:
    """The echo env of ``openenv init``, its session cap raised as the template's comment says."""
    root = tmp_path_factory.mktemp("scaffold")
    subprocess.run([sys.executable, "-m", "openenv.cli", "init", "echo_env"], cwd=root,
                   check=True, capture_output=True, timeout=120)
    app = root / "echo_env" / "server" / "app.py"
    text = app.read_text()
    assert "max_concurrent_envs=1," in text
    app.write_text(text.replace("max_concurrent_envs=1,", f"max_concurrent_envs={SESSIONS},"))
    return root / "echo_env"


def serve_scaffold(folder: Path, port: int) -> str:
    return f"cd {folder} && exec {sys.executable} -m uvicorn server.app:app --port {port}"


@pytest.fixture(scope="module")
def echo(scaffold):
    """An env that launched the scaffold's server (``launch_command``); closing it stops it."""
    port = free_port()
    env = gym.make(ENV_ID, base_url=f"http://127.0.0.1:{port}", max_turns=3,
                   launch_command=serve_scaffold(scaffold, port), launch_timeout=120)
    pid = env.unwrapped.server.process.pid
    yield env
    env.close()
    assert not alive(pid), "the env left its server running"


# -- keywords: checked at gym.make, one line, before any server is asked -----------------------

@pytest.mark.parametrize("keyword, value, says", [
    ("base_url", "ftp://host", "http(s) URL"),
    ("action_field", 3, "field name"),
    ("observation_field", ["x"], "field name"),
    ("launch_command", [], "shell command line"),
    ("launch_timeout", 0, "positive, finite number"),
    ("timeout", "5", "positive, finite number"),
    ("max_turns", 0, "positive integer"),
    ("heldout_size", 0, "positive integer"),
    ("reward_max", math.nan, "finite number"),
    ("reward_range", [1, 0], "pair [low, high]"),
    ("reward_range", [0, math.inf], "pair [low, high]"),
    ("max_observation_bytes", 10, "at least 1024"),
    ("pack", 3, "pack name"),
    ("python_tool", "yes", "PythonTool"),
])
def test_bad_keywords_are_refused_at_make_in_one_line(keyword, value, says):
    with pytest.raises((TypeError, ValueError)) as err:
        gym.make(ENV_ID, **{keyword: value})
    message = str(err.value)
    assert "\n" not in message and keyword in message and says in message, message


def test_keywords_the_server_owns_a_missing_url_and_a_misspelling_are_one_line():
    for kwargs, says in [({"base_url": "http://127.0.0.1:1", "pack": "gsm8k"}, "belongs to the server"),
                         ({"python_tool": True}, "belongs to the server"),
                         ({}, "base_url takes the server's URL"),
                         ({"base_ulr": "http://127.0.0.1:1"}, "did you mean 'base_url'?")]:
        with pytest.raises((TypeError, ValueError)) as err:
            gym.make(ENV_ID, **kwargs)
        assert "\n" not in str(err.value) and says in str(err.value), str(err.value)


def test_an_unreachable_url_is_one_line_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError) as err:
        gym.make(ENV_ID, base_url=url)
    assert "\n" not in str(err.value) and url in str(err.value) and "/schema" in str(err.value)


# -- the action schema ------------------------------------------------------------------------

def _schema(**props: dict) -> dict:
    required = [k for k, p in props.items() if p.pop("required", False)]
    return {"type": "object", "properties": props, "required": required}


def test_the_completion_fills_the_single_required_string_field_or_the_named_one():
    url = "http://h"
    one = _schema(message={"type": "string", "required": True}, tag={"type": "string"},
                  metadata={"type": "object"})
    assert action_field(one, None, url) == "message"
    two = _schema(message={"type": "string"}, tag={"type": "string"})
    assert action_field(two, "tag", url) == "tag"  # two optional strings: the named one
    with pytest.raises(SchemaError, match="2 \\(message, tag\\)"):
        action_field(two, None, url)
    with pytest.raises(SchemaError, match="also requires message"):
        action_field(one, "tag", url)  # the required field would have no value
    optional = _schema(text={"anyOf": [{"type": "string"}, {"type": "null"}]}, n={"type": "integer"})
    assert action_field(optional, None, url) == "text"  # no required field: the one string
    cases = [
        (_schema(a={"type": "string", "required": True}, b={"type": "string", "required": True}),
         None, "2 (a, b) required string fields"),
        (_schema(n={"type": "integer", "required": True}), None, "no required string"),
        (one, "nope", "'nope' is no field"),
        (_schema(message={"type": "string", "required": True}, n={"type": "integer"}), "n",
         "not a string field"),
        (_schema(code={"type": "string", "required": True}, lang={"type": "string",
                                                                    "required": True}),
         "code", "also requires lang"),
        ({"type": "object", "properties": {}}, None, "has no fields"),
    ]
    for schema, wanted, says in cases:
        with pytest.raises(SchemaError) as err:
            action_field(schema, wanted, url)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_wrong_action_field_is_refused_at_make_naming_the_servers_fields(echo):
    with pytest.raises(SchemaError) as err:
        gym.make(ENV_ID, base_url=echo.unwrapped.url, action_field="completion")
    message = str(err.value)
    assert "\n" not in message and "'completion' is no field" in message and "message" in message
    with pytest.raises(SchemaError, match="observation_field 'nope'"):
        gym.make(ENV_ID, base_url=echo.unwrapped.url, observation_field="nope")


# -- episodes on the scaffold -----------------------------------------------------------------

def test_scaffold_episodes_play_until_the_turn_limit_and_sum_the_rewards(echo):
    env = echo.unwrapped
    assert env.action_field == "message" and env.max_turns == 3
    prompt, info = echo.reset(seed=0)
    assert json.loads(prompt)["echoed_message"].endswith("environment ready!")
    assert info["task_id"].startswith(f"{env.pack.name}/seed-") and info["seed"] % 2 == 0
    obs, r1, terminated, truncated, _ = echo.step("abc")  # the template pays 0.1 per char
    assert json.loads(obs) == {"echoed_message": "abc", "message_length": 3}
    assert (r1, terminated, truncated) == (pytest.approx(0.3), False, False)
    echo.step("hello")
    obs, r3, terminated, truncated, info = echo.step("")
    assert (obs, r3, terminated, truncated) == ("", 0.0, False, True)  # never done: truncated
    assert info["rewards"] == {"reward": pytest.approx(0.8)} and info["turns"] == 3
    assert info["passed"] is True and info["truncated_turns"] is True  # no maximum: > 0 passes
    assert not is_infra_error(info)


def test_tasks_are_seeds_held_out_ones_odd_and_fixed(echo):
    env = echo.unwrapped
    held = [env.pack.task_at("test", i) for i in range(3)]
    assert [t["seed"] for t in held] == [1, 3, 5] and env.pack.size("test") == 64
    assert env.pack.get(held[1].id) == held[1]
    assert env.pack.size("train") is None and env.pack.task_at("train", 5)["seed"] == 10
    assert env.prompt(held[0]) == held[0]["prompt"]
    for bad in ("seed-x", "seed-129", "seed-01"):  # 129: past the 64 held-out seeds
        with pytest.raises(ValueError, match="no task"):
            env.pack.get(bad)


def test_score_is_one_turn_and_reward_max_decides_passed(echo):
    env = echo.unwrapped
    task = env.pack.task_at("train", 0)
    reward, info = env.score(task, "ab")
    assert reward == pytest.approx(0.2) and info["passed"] is True
    assert info["truncated_turns"] is True  # the server wanted more turns
    strict = gym.make(ENV_ID, base_url=env.url, reward_max=1.0, max_turns=1).unwrapped
    try:
        assert strict.score(task, "ab")[1]["passed"] is False
        assert strict.score(task, "a" * 12)[1]["passed"] is True
        reward, info = strict.score(task, "\ud800")  # not encodable: graded here, never sent
        assert (reward, info["reason"], info["passed"]) == (0.0, "invalid_text", False)
    finally:
        strict.close()


def test_a_server_at_capacity_is_an_infrastructure_error_saying_so(echo, monkeypatch):
    monkeypatch.setattr(session_module, "CAPACITY_WAIT_S", 0.3)
    env = echo.unwrapped
    episodes = [env.episode(env.pack.task_at("train", 0)) for _ in range(SESSIONS + 1)]
    results = [ep.step("x") for ep in episodes]
    *held, refused = results
    assert not any(is_infra_error(r[4]) for r in held)
    assert is_infra_error(refused[4]) and refused[4]["reason"] == "server_error"
    line = refused[4]["verdict"].details["error"]
    assert env.url in line and "max_concurrent_envs" in line and "\n" not in line
    for ep in episodes:
        ep.close()
    again = env.episode(env.pack.task_at("train", 0))
    assert not is_infra_error(again.step("y")[4])  # the sessions were freed
    again.close()


def test_the_env_meets_the_learner_contract(echo):
    from tests.test_learner_env import attribute_problems, call_shape_problems, info_problems

    env = echo.unwrapped
    assert call_shape_problems(env) == [] and attribute_problems(env) == []
    assert info_problems(env.score(env.pack.task_at("test", 0), "hi")[1]) == []
    assert env.perturbations(env.pack.task_at("test", 0))  # the gates' variants work on it


# -- a hostile server: bounds on what the client takes ------------------------------------------

def test_rewards_out_of_range_and_oversized_messages_are_one_line_infrastructure_errors():
    from tests.openenv_hostile_server import BIG_PROMPT, hostile

    with hostile() as url:
        env = gym.make(ENV_ID, base_url=url, max_turns=1, reward_range=[0, 1]).unwrapped
        try:
            task = env.pack.task_at("train", 0)
            assert env.score(task, "fine") == (0.5, env.score(task, "fine")[1])
            for sent, says in (("1e308", "outside the declared reward_range [0, 1]"),
                               ("1" + "0" * 400, "integer of 401 digits, outside"),
                               ("-0.5", "outside the declared reward_range"),
                               ('"1"', "not a number"), ("true", "not a number")):
                reward, info = env.score(task, f"reward {sent}")
                line = info["verdict"].details["error"]
                assert is_infra_error(info) and reward == 0.0, sent
                assert says in line and url in line and "\n" not in line, line
            reward, info = env.score(task, f"observation {BIG_PROMPT}")
            line = info["verdict"].details["error"]
            assert is_infra_error(info) and "over 1048576 bytes" in line, line
            assert "max_observation_bytes" in line and "\n" not in line
            # The 50 MB reset prompt: the task has no prompt, and reset says why in one line.
            with pytest.raises(ConnectionError, match="max_observation_bytes") as err:
                env.reset(seed=0, options={"task_id": f"{env.pack.name}/seed-2"})
            assert "\n" not in str(err.value)
            assert env.score(task, "fine")[0] == 0.5  # and the client keeps playing
        finally:
            env.close()
    with hostile(big_metadata=True) as url, pytest.raises(
            ConnectionError, match="more than 1048576 bytes for /metadata"):
        gym.make(ENV_ID, base_url=url)


def test_the_default_range_refuses_what_group_normalisation_cannot_survive():
    from envs.domains.openenv_client.session import reward_problem

    low, high = -1e6, 1e6
    assert reward_problem(0.5, low, high) is None and reward_problem(-3, low, high) is None
    assert "outside" in reward_problem(1e308, low, high)
    assert "not a finite number" in reward_problem(math.nan, low, high)
    assert "integer of 401 digits" in reward_problem(10**400, low, high)  # no OverflowError


# -- launch_command and a dying server --------------------------------------------------------

def test_a_launch_that_fails_or_never_answers_is_one_line_with_its_stderr():
    url = f"http://127.0.0.1:{free_port()}"
    dies = [sys.executable, "-c", "import sys; print('no such app', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(ServerStartError) as err:
        gym.make(ENV_ID, base_url=url, launch_command=dies)
    message = str(err.value)
    assert "\n" not in message and "exited with code 3" in message and "no such app" in message
    silent = f"{sys.executable} -c 'import sys, time; print(\"waiting\", file=sys.stderr); " \
             "sys.stderr.flush(); time.sleep(60)'"
    with pytest.raises(ServerStartError) as err:
        gym.make(ENV_ID, base_url=url, launch_command=silent, launch_timeout=1.5)
    message = str(err.value)
    assert "did not answer within 1.5 s" in message and "waiting" in message, message


def test_a_server_killed_mid_episode_is_an_infrastructure_error_naming_the_url(scaffold):
    port = free_port()
    env = gym.make(ENV_ID, base_url=f"http://127.0.0.1:{port}", max_turns=4,
                   launch_command=serve_scaffold(scaffold, port), launch_timeout=120).unwrapped
    try:
        task = env.pack.task_at("train", 1)
        episode = env.episode(task)
        assert episode.step("first")[2:4] == (False, False)
        os.killpg(env.server.process.pid, signal.SIGKILL)
        env.server.process.wait(30)
        _, reward, terminated, _, info = episode.step("second")
        assert terminated and is_infra_error(info) and info["passed"] is False
        line = info["verdict"].details["error"]
        assert env.url in line and "\n" not in line
        reward, info = env.score(task, "again")  # a new episode: infrastructure, not a 0
        assert is_infra_error(info) and env.url in info["verdict"].details["error"]
        outage = env.infra_outage()
        assert outage is not None and env.url in outage and "exited" in outage
        fresh = env.pack.task_at("train", 7)  # a task drawn now has no prompt to show
        info = env.episode(fresh).step("x")[4]
        assert is_infra_error(info) and env.url in info["verdict"].details["error"]
        with pytest.raises(ConnectionError, match=env.url):
            env.reset(seed=0)
    finally:
        env.close()


def test_a_launched_server_is_stopped_at_interpreter_exit(scaffold, tmp_path):
    port = free_port()
    script = textwrap.dedent(f"""
        import gymnasium as gym, envs
        env = gym.make({ENV_ID!r}, base_url="http://127.0.0.1:{port}",
                       launch_command={serve_scaffold(scaffold, port)!r}, launch_timeout=120)
        env.unwrapped.episode(env.unwrapped.pack.task_at("train", 0)).step("hi")
        print(env.unwrapped.server.process.pid, flush=True)
    """)  # exits without close()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    pid = int(done.stdout.split()[-1])
    assert not alive(pid), "the server outlived the interpreter that launched it"


# -- the learner trains on it -----------------------------------------------------------------

def test_the_learner_trains_on_the_scaffold_multi_turn(echo, tmp_path):
    from learner import run

    path = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    kwargs = {"base_url": echo.unwrapped.url, "max_turns": 2, "heldout_size": 2}
    # One token a turn: turns of different lengths, so rewards differ in a group (the
    # template pays 0.1 a character) and the policy is updated.
    code = run.main(["--env", ENV_ID, "--env-kwargs", json.dumps(kwargs), "--model", str(path),
                     "--max-turns", "2", "--steps", "2", "--prompts-per-step", "2",
                     "--group-size", "4", "--max-new-tokens", "1", "--eval-size", "2",
                     "--eval-batch-size", "2", "--no-eval-perturbations", "--output-dir",
                     str(out), "--no-progress", "--num-threads", "1", "--learning-rate", "1e-3"])
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "step" in r][-1] == 2
    last = rows[-1]
    assert all(r["loss"] is not None and r["reward/std"] > 0 for r in rows if "loss" in r)
    assert last["turns/mean"] == 2 and last["samples/infra_errors"] == 0
    assert last["eval/n"] == 2 and last["eval/infra_errors"] == 0
    sample = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    roles = [t["role"] for t in sample["transcripts"][0]]
    assert roles[:2] == ["user", "assistant"] and len(roles) == 4  # two turns, an answer between


# -- our exported env, round-tripped ----------------------------------------------------------

def test_our_exported_env_round_trips_with_rewards_equal_to_in_process_score():
    port = free_port()
    serve = [sys.executable, "-m", "envs", "serve", "grpo/MathExact-v0", "--pack", "arith",
             "--port", str(port), "--no-token"]
    remote = gym.make(ENV_ID, base_url=f"http://127.0.0.1:{port}", max_turns=1,
                      launch_command=serve, launch_timeout=180).unwrapped
    local = gym.make("grpo/MathExact-v0", pack="arith").unwrapped
    try:
        assert remote.action_field == "completion"
        agree, total = 0, 0
        for i in range(4):
            task = remote.pack.task_at("test", i)
            served = local.pack.get(remote.score(task, "no idea")[1]["server_task_id"])
            assert remote.prompt(task) == local.prompt(served)  # the prompt crossed intact
            gold = local.gold_completion(served)
            for completion in ("no idea", gold, "\\boxed{0}", f"{gold} or \\boxed{{-1}}", ""):
                reward, info = remote.score(task, completion)
                want, want_info = local.score(served, completion)
                total += 1
                agree += reward == want and info["passed"] == want_info["passed"]
                assert not is_infra_error(info)
        assert agree == total == 20
    finally:
        remote.close()


@pytest.mark.docker
def test_a_served_tool_env_plays_its_turns_over_one_session_as_in_process():
    port = free_port()
    serve = [sys.executable, "-m", "envs", "serve", "grpo/MathPython-v0", "--port", str(port),
             "--no-token"]
    remote = gym.make(ENV_ID, base_url=f"http://127.0.0.1:{port}", max_turns=4,
                      launch_command=serve, launch_timeout=180).unwrapped
    local = gym.make("grpo/MathPython-v0").unwrapped
    try:
        task = remote.pack.task_at("test", 0)
        call = "Let me compute.\n```python\nprint(6 * 7)\n```"
        for final in ("So the answer is \\boxed{42}.", None):  # None: the gold
            episode = remote.episode(task)
            tool_output, reward, terminated, truncated, _ = episode.step(call)
            assert (reward, terminated, truncated) == (0.0, False, False)
            assert "42" in tool_output  # the server's sandbox ran the call
            served = local.pack.get(remote.score(task, "")[1]["server_task_id"])
            final = final or local.gold_completion(served)
            got = episode.step(final)
            mine = local.episode(served)
            assert mine.step(call)[0] == tool_output
            want = mine.step(final)
            assert got[1:4] == want[1:4] and got[4]["passed"] == want[4]["passed"]
            assert got[4]["turns"] == 2 and not is_infra_error(got[4])
    finally:
        remote.close()
        local.close()
