"""``python -m envs serve``: grpo-gym envs over OpenEnv, checked with OpenEnv's own client and
validator, against the same env in process. The sandboxed envs' side-by-side runs are in
``test_openenv_serve_docker.py``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason='pip install -e ".[openenv]"')

import httpx  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

import envs  # noqa: E402,F401
from envs.tools.cli_serve import ServeError, resolve_token  # noqa: E402
from envs.tools.serve.manifest import manifest, write_manifest  # noqa: E402
from envs.tools.serve.side_by_side import (  # noqa: E402
    SERVED,
    mixed_cases,
    play,
    reference,
    replay_kwargs,
)
from tasks import PackError  # noqa: E402
from tests import learner_helpers as h  # noqa: E402
from tests.openenv_serve_helpers import served  # noqa: E402
from tests.polling import free_port, wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MATH = "grpo/MathExact-v0"
ARITH = {"pack": "arith", "level": 1}
# A third-party env (not grpo/*): ShortEnv, whose grading "fails" for completions with the marker.
THIRD_PARTY = "thirdparty/Short-v0"
gym.register(THIRD_PARTY, entry_point=h.ShortEnv, kwargs={"fail_marker": "SANDBOX DOWN"})


def ws_url(url: str, query: str = "") -> str:
    return url.replace("http://", "ws://") + "/ws" + query


def ws_send(sock, message: dict | str) -> dict:
    sock.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(sock.recv(timeout=30))


def first_reply(url: str, message: dict) -> dict:
    """A fresh session's answer to ``message``; a server at capacity answers (and closes) before
    reading it."""
    with connect(ws_url(url)) as sock:
        with contextlib.suppress(ConnectionClosed):
            sock.send(json.dumps(message))
        return json.loads(sock.recv(timeout=30))


def assert_still_serves(url: str) -> None:
    """Health, then a whole episode on a fresh session."""
    assert httpx.get(f"{url}/health").json()["status"] == "healthy"
    with GenericEnvClient(base_url=url) as client:
        assert client.reset(seed=0).observation["prompt"]
        assert client.step({"completion": "\\boxed{0}"}).done


# -- the core stays free of openenv -----------------------------------------------------------
def test_core_and_list_work_without_openenv_and_serve_names_the_extra():
    # One process: `list` imports no openenv; with openenv made unimportable, serve says how
    # to install the extra in one line.
    code = ("import sys; from envs.__main__ import main; import envs.tools.cli_serve; "
            "rc = main(['list']); print('openenv' in sys.modules, rc); "
            "sys.modules['openenv'] = None; print('serve', main(['serve', sys.argv[1]]))")
    run = subprocess.run([sys.executable, "-c", code, MATH], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert MATH in run.stdout
    assert "False 0" in run.stdout and "serve 2" in run.stdout, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install -e ".[openenv]"' in lines[0], run.stderr


# -- episodes over the wire ---------------------------------------------------------------------
def test_an_episode_over_the_wire_is_the_in_process_episode():
    env = gym.make(MATH, **ARITH)
    prompt, info = env.reset(seed=5)
    task = env.unwrapped.pack.get(info["task_id"])
    with served(MATH, ARITH) as url, GenericEnvClient(base_url=url) as client:
        first = client.reset(seed=5)
        obs = first.observation
        assert obs["prompt"] == prompt and obs["task_id"] == task.id and not first.done
        assert obs["pack_version"] == info["pack_version"]
        assert obs["reason"] is None and obs["rewards"] == {} and obs["passed"] is None
        state = client.state()
        assert state["task_id"] == task.id and state["step_count"] == 0 and state["episode_id"]
        right = f"The answer is \\boxed{{{task['answer']}}}."
        result = client.step({"completion": right})
        want, graded = env.unwrapped.score(task, right)
        assert result.done and result.reward == want
        obs = result.observation
        assert obs["prompt"] == "" and obs["passed"] is True and obs["reason"] == graded["reason"]
        assert obs["rewards"] == graded["rewards"] and obs["infra_error"] is False
        assert obs["grading_s"] >= 0 and client.state()["step_count"] == 1
        again = client.reset(task_id=task.id)  # reset picks a task by id, as options do
        assert again.observation["task_id"] == task.id
        assert client.state()["step_count"] == 0
        other = client.reset(seed=6).observation["task_id"]
        assert other == env.reset(seed=6)[1]["task_id"]


def test_a_train_server_refuses_a_test_task_by_id_with_task_envs_line():
    env = gym.make(MATH, **ARITH).unwrapped
    held_out = env.pack.task_at("test", 0)
    with pytest.raises(PackError) as in_process:
        env.reset(options={"task_id": held_out.id})
    refusal = str(in_process.value)
    assert "\n" not in refusal and "split='all'" in refusal
    with served(MATH, ARITH) as url, GenericEnvClient(base_url=url) as client:
        with pytest.raises(RuntimeError) as over_the_wire:
            client.reset(task_id=held_out.id)
        assert refusal in str(over_the_wire.value)
        with pytest.raises(RuntimeError, match="not this env's split"):
            client.reset(options={"task_id": held_out.id})  # the options' way too
        train = client.reset(seed=0).observation["task_id"]  # the session still serves
        assert env.pack.get(train).split == "train"
        assert client.reset(task_id=train).observation["task_id"] == train
    with served(MATH, {**ARITH, "split": "all"}) as url, GenericEnvClient(base_url=url) as client:
        obs = client.reset(task_id=held_out.id).observation
        assert obs["task_id"] == held_out.id and obs["prompt"] == env.prompt(held_out)
        with pytest.raises(RuntimeError, match="by id only"):
            client.reset(seed=0)  # as gym.make(..., split="all").reset(seed=0)


def test_a_third_party_env_is_served_and_infra_errors_say_so():
    with served(THIRD_PARTY) as url, GenericEnvClient(base_url=url) as client:
        client.reset(seed=1)
        ok = client.step({"completion": "12"})
        assert ok.done and ok.reward > 0 and ok.observation["infra_error"] is False
        client.reset(seed=1)
        lost = client.step({"completion": "SANDBOX DOWN"})
        assert lost.observation["infra_error"] is True and lost.observation["reason"] == "sandbox_error"


def test_generic_client_rewards_equal_score_on_mixed_completions():
    for env_id in (MATH, "grpo/JsonSchema-v0"):
        kwargs = SERVED[env_id]
        env = gym.make(env_id, **kwargs).unwrapped
        cases = mixed_cases(env, env_id, kwargs, 24)
        assert {c.kind for c in cases} >= {"gold", "hacks", "honest"}
        with served(env_id, replay_kwargs(env_id)) as url, \
                GenericEnvClient(base_url=url) as client:
            got = [play(client, case)[0] for case in cases]
        want = [reference(env, case) for case in cases]
        assert got == want, env_id
        assert len(set(want)) > 1  # mixed quality: not one reward for all


# -- bad input ----------------------------------------------------------------------------------
def test_bad_input_gets_a_clear_error_and_the_server_keeps_serving():
    with served(MATH, ARITH, max_body_bytes=1 << 20) as url:
        with connect(ws_url(url), max_size=None) as sock:
            ws_send(sock, {"type": "reset", "data": {"seed": 0}})
            for data, needle in (({"text": "x"}, "completion"),  # malformed: no completion
                                 ({"completion": "x", "hint": 1}, "hint"),  # unknown field
                                 ({"completion": 42}, "string")):  # not a string
                reply = ws_send(sock, {"type": "step", "data": data})
                assert reply["type"] == "error", data
                assert needle in json.dumps(reply["data"]), reply
            assert ws_send(sock, "{not json")["data"]["code"] == "INVALID_JSON"
            assert ws_send(sock, {"type": "step", "data": {"completion": "\\boxed{1}"}})[
                "data"]["done"] is True
            after = ws_send(sock, {"type": "step", "data": {"completion": "\\boxed{1}"}})
            assert after["type"] == "error" and "reset first" in after["data"]["message"]
        assert_still_serves(url)
        with connect(ws_url(url, "?session_id=no-such-session")) as sock:
            reply = json.loads(sock.recv(timeout=30))
            assert reply["data"]["code"] == "SESSION_ERROR"
            assert "Unknown session_id" in reply["data"]["message"]
        assert_still_serves(url)
        big = "x" * (50 << 20)  # 50 MB
        over_http = httpx.post(f"{url}/step", content=json.dumps({"action": {"completion": big}}),
                               headers={"content-type": "application/json"}, timeout=60)
        assert over_http.status_code == 413 and "limit" in over_http.json()["detail"]
        assert_still_serves(url)
        with connect(ws_url(url), max_size=None) as sock:
            sock.send(json.dumps({"type": "step", "data": {"completion": big}}))
            with pytest.raises(ConnectionClosed) as closed:
                sock.recv(timeout=30)
            assert closed.value.rcvd.code == 1009  # message too big
        assert_still_serves(url)
        for body, status in (({"action": {"completion": 1}}, 422),
                             ({"action": {"completion": "x", "hint": 2}}, 422),
                             ({"action": {"completion": "\\boxed{1}"}}, 409)):  # no episode
            reply = httpx.post(f"{url}/step", json=body)
            assert reply.status_code == status and reply.json()["detail"], body
        reply = httpx.post(f"{url}/reset", json={"task_id": "arith/no-such-task"})
        assert reply.status_code == 400 and "no task" in reply.json()["detail"]
        assert_still_serves(url)


def test_a_token_guards_every_route_but_health():
    with served(MATH, ARITH, token="s3cret") as url:
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/schema").status_code == 401
        assert httpx.get(f"{url}/schema", headers={"Authorization": "Bearer nope"}
                         ).status_code == 401
        assert httpx.get(f"{url}/schema", headers={"Authorization": "Bearer s3cret"}
                         ).status_code == 200
        with pytest.raises(Exception), GenericEnvClient(base_url=url) as client:  # noqa: B017
            client.reset()
        with GenericEnvClient(base_url=url, headers={"Authorization": "Bearer s3cret"}
                              ) as client:
            assert client.reset(seed=0).observation["prompt"]


def test_a_wide_bind_needs_a_token_unless_waived(monkeypatch):
    monkeypatch.delenv("GRPO_GYM_SERVE_TOKEN", raising=False)
    assert resolve_token("127.0.0.1", None, False) is None
    with pytest.raises(ServeError, match="needs a bearer token"):
        resolve_token("0.0.0.0", None, False)
    assert resolve_token("0.0.0.0", None, True) is None
    monkeypatch.setenv("GRPO_GYM_SERVE_TOKEN", "t")
    assert resolve_token("0.0.0.0", None, False) == "t"
    from envs.__main__ import main

    monkeypatch.delenv("GRPO_GYM_SERVE_TOKEN")
    assert main(["serve", MATH, "--host", "0.0.0.0"]) == 2
    assert main(["serve", "grpo/NoSuch-v0"]) == 2
    assert main(["serve", MATH, "--env-kwargs", "[1]"]) == 2


# -- sessions -----------------------------------------------------------------------------------
def test_a_killed_client_frees_its_session():
    client_code = ("import sys, time; from openenv.core.generic_client import GenericEnvClient; "
                   "c = GenericEnvClient(base_url=sys.argv[1]); c.__enter__(); c.reset(seed=0); "
                   "print('ready', flush=True); time.sleep(600)")
    with served(MATH, ARITH, max_sessions=1) as url:
        child = subprocess.Popen([sys.executable, "-c", client_code, url], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            taken = first_reply(url, {"type": "reset", "data": {}})  # the one session is taken
            assert taken["data"]["code"] == "CAPACITY_REACHED"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        deadline = time.monotonic() + 30
        while True:  # the server notices the dropped connection and ends the session
            reply = first_reply(url, {"type": "reset", "data": {"seed": 0}})
            if reply["type"] == "observation" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert reply["type"] == "observation", reply
        assert_still_serves(url)


def _ws_client(url: str, i: int, hold_s: float) -> str:
    """One raw WebSocket client (the websockets library OpenEnv's client uses): reset, hold
    the session ``hold_s``, step. What it read: "ok", an error code, or "closed <code>"."""
    import asyncio

    import websockets

    async def play() -> str:
        try:
            async with websockets.connect(ws_url(url), open_timeout=60) as sock:
                await sock.send(json.dumps({"type": "reset", "data": {"seed": i}}))
                reply = json.loads(await asyncio.wait_for(sock.recv(), 60))
                if reply["type"] == "error":
                    return reply["data"]["code"]
                await asyncio.sleep(hold_s)
                await sock.send(json.dumps({"type": "step", "data": {"completion": "1"}}))
                reply = json.loads(await asyncio.wait_for(sock.recv(), 60))
                return "ok" if reply["type"] == "observation" else reply["data"]["code"]
        except ConnectionClosed as exc:
            return f"closed {exc.rcvd.code if exc.rcvd else None}"
    return play()


def _mcp(url: str, method: str, **params) -> dict:
    return httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                          "params": params}).json()


def test_every_refused_client_reads_capacity_reached_never_a_bare_close():
    import asyncio

    # Before: of 200 concurrent clients at --max-sessions 8, 185 read a bare close 1000.
    with served(MATH, ARITH, max_sessions=4) as url:
        async def crowd() -> list[str]:
            return await asyncio.gather(*(_ws_client(url, i, 0.3) for i in range(60)))
        seen = asyncio.run(crowd())
        assert set(seen) == {"ok", "CAPACITY_REACHED"}, seen
        assert seen.count("ok") >= 4
        # Sessions made over HTTP MCP count against the same cap; past it, the protocol's
        # capacity error, over MCP and over the WebSocket alike.
        made = [_mcp(url, "openenv/session/create") for _ in range(6)]
        assert sum("result" in m for m in made) == 4
        assert all("capacity" in m["error"]["message"] for m in made if "error" in m)
        assert asyncio.run(_ws_client(url, 0, 0)) == "CAPACITY_REACHED"
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"), \
                GenericEnvClient(base_url=url) as client:
            client.reset(seed=0)
        for m in made:
            if "result" in m:
                _mcp(url, "openenv/session/close", session_id=m["result"]["session_id"])
        assert_still_serves(url)


def test_idle_sessions_are_reclaimed_after_the_session_timeout():
    import asyncio

    with served(MATH, ARITH, max_sessions=2, session_timeout_s=1.0) as url:
        made = [_mcp(url, "openenv/session/create") for _ in range(2)]
        assert all("result" in m for m in made)
        assert asyncio.run(_ws_client(url, 0, 0)) == "CAPACITY_REACHED"
        # OpenEnv's reaper (it looks every 5 s at the least) frees the idle MCP sessions.
        assert wait_until(lambda: asyncio.run(_ws_client(url, 0, 0)) == "ok", timeout=30)
        # A WebSocket whose client says nothing for longer is closed, saying why.
        with connect(ws_url(url)) as sock:
            assert ws_send(sock, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
            with pytest.raises(ConnectionClosed) as closed:
                sock.recv(timeout=30)
            assert closed.value.rcvd.code == 1008 and "idle" in closed.value.rcvd.reason
        assert_still_serves(url)
    from envs.__main__ import main

    assert main(["serve", MATH, "--session-timeout", "-1"]) == 2


def test_internal_errors_are_generic_to_the_client_and_detailed_in_the_log(monkeypatch, caplog):
    from envs.tools.serve.environment import ServedEnv

    with served(MATH, ARITH) as url:
        # OpenEnv's own session_id (and func) must not reach its internal call: a TypeError
        # whose text would go to the client as EXECUTION_ERROR.
        for extra in ({"session_id": "abc"}, {"func": 1}):
            reply = first_reply(url, {"type": "reset", "data": {"seed": 0, **extra}})
            assert reply["type"] == "observation", reply
        assert httpx.post(f"{url}/step", json={"action": {"completion": "1"}, "func": 1}
                          ).status_code == 409  # no episode: said so, no TypeError

        def broken(self, task):
            raise TypeError("secret internal detail at 0xdeadbeef")

        monkeypatch.setattr(ServedEnv, "episode", broken)
        caplog.set_level("ERROR", logger="envs.tools.serve")
        reply = first_reply(url, {"type": "reset", "data": {"seed": 0}})
        message = reply["data"]["message"]
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "internal error" in message
        assert "secret" not in message and "TypeError" not in message
        over_http = httpx.post(f"{url}/reset", json={"seed": 0})
        assert over_http.status_code == 500 and "secret" not in over_http.text
        ref = message.rsplit("logged as ", 1)[1].rstrip(")")
        logged = [r for r in caplog.records if ref in r.getMessage()]
        assert logged and "secret internal detail" in str(logged[0].exc_info[1])
        monkeypatch.undo()
        assert_still_serves(url)


# -- grading stays on the server -----------------------------------------------------------------
def _builtin_packs() -> list[tuple[str, str]]:
    from envs.tools.cli_card import targets

    return targets(None, None, all_builtin=True)


def _secrets(env, task) -> list[str]:
    """Text that would give the answer away: the gold completion and the record fields the
    grader reads (answers, tests, schemas' expected values), each in whole."""
    found = [env.gold_completion(task)]
    for field in (*env.required_fields, "answer", "expected", "tests", "test", "solution",
                  "canonical_solution"):
        if field in task.fields:
            value = task.fields[field]
            found.append(value if isinstance(value, str) else json.dumps(value))
    return [s for s in found if s and len(s.strip()) >= 4]


def test_no_observation_before_done_carries_gold_text_in_any_built_in_pack():
    from fastapi.testclient import TestClient

    from envs.tools.serve.app import build_app

    checked = 0
    for env_id, pack in _builtin_packs():
        app = build_app(env_id, {"pack": pack, "split": "all"})  # test tasks, by id
        env = app.state.served.env
        size = env.pack.size("test") or env.pack.size("train") or 50
        split = "test" if env.pack.size("test") is not None or env.pack.size("train") is None \
            else "train"
        with TestClient(app) as http, http.websocket_connect("/ws") as sock:
            for i in range(0, size, max(1, size // 6))[:6]:
                task = env.pack.task_at(split, i)
                sock.send_text(json.dumps({"type": "reset", "data": {"task_id": task.id}}))
                reply = json.loads(sock.receive_text())
                assert reply["type"] == "observation", (env_id, pack, reply)
                obs = reply["data"]["observation"]
                assert obs["prompt"] == env.prompt(task)  # what the policy sees in process
                rest = json.dumps({k: v for k, v in obs.items() if k != "prompt"})
                sock.send_text(json.dumps({"type": "state"}))
                rest += sock.receive_text()
                for secret in _secrets(env, task):
                    assert secret not in rest, (env_id, pack, task.id)
                    if secret not in env.pack.prompt(task):  # not shown by the pack itself
                        assert secret not in obs["prompt"], (env_id, pack, task.id)
                assert obs["reason"] is None and obs["rewards"] == {} and obs["passed"] is None
                checked += 1
    assert checked >= 4 * len(_builtin_packs())


# -- OpenEnv's validator and the manifest --------------------------------------------------------
# The installed CLI's entry point (the `openenv` script's), run for each check in one process:
# starting it costs seconds, its verdict is its exit status.
VALIDATE = """
import sys
from openenv.cli.__main__ import main
for args in sys.argv[1:]:
    sys.argv = ["openenv", "validate", *args.split()]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print(f"== {args} -> exit {code}", flush=True)
"""


def _validate(*runs: str) -> dict[str, tuple[int, str]]:
    """``openenv validate ARGS`` for each of ``runs``: exit status and output, by ARGS."""
    out = subprocess.run([sys.executable, "-c", VALIDATE, *runs], capture_output=True,
                         text=True, timeout=300).stdout
    results, chunk = {}, []
    for line in out.splitlines():
        if line.startswith("== "):
            args, code = line[3:].rsplit(" -> exit ", 1)
            results[args] = (int(code), "\n".join(chunk))
            chunk = []
        else:
            chunk.append(line)
    assert len(results) == len(runs), out
    return results


def test_openenv_validate_passes_on_the_served_envs(tmp_path):
    port = free_port()
    # One through the real command line (it also writes the manifest), two in process.
    cli = subprocess.Popen([sys.executable, "-m", "envs", "serve", MATH, "--pack", "arith",
                            "--env-kwargs", '{"level": 1}', "--port", str(port),
                            "--manifest-dir", str(tmp_path / "math")], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert "wrote" in cli.stdout.readline()
        assert f"serving {MATH}" in cli.stdout.readline()
        _wait_healthy(f"http://127.0.0.1:{port}")
        with served("grpo/CodeTests-v0", {"pack": "humaneval"}) as code, \
                served("grpo/JsonSchema-v0", {"pack": "extract"}) as js:
            urls = [f"http://127.0.0.1:{port}", code, js]
            runs = [f"{url} --level {level}" for url in urls for level in ("runtime", "semantic")]
            results = _validate(*runs, f"{tmp_path / 'math'} --level static")
    finally:
        cli.send_signal(signal.SIGINT)
        cli.wait(timeout=60)
    for args, (code, out) in results.items():
        assert code == 0 and "Verdict: PASS" in out and "FAIL" not in out, (args, out)


def test_the_manifest_declares_the_reward_range_and_the_cards_tolerances(tmp_path):
    from envs.tools.card.checks import FLOOR_MAX, ORACLE_TOLERANCE

    env = gym.make(MATH, **ARITH).unwrapped
    doc = manifest(env)
    reward = doc["validation"]["reward"]
    assert reward["range"] == [0.0, 1.1]  # correct 1.0 + format 0.1
    assert reward["oracle_tolerance"] == pytest.approx(ORACLE_TOLERANCE * 1.1)
    assert reward["floor_margin"] == pytest.approx((1 - FLOOR_MAX) * 1.1)
    assert doc["grpo_gym"]["report_card"]["semantic.oracle_max"] == "pass"
    assert "--pack arith" in doc["grpo_gym"]["serve"]
    weighted = gym.make(MATH, reward_weights={"format": 0.0}, **ARITH).unwrapped
    assert manifest(weighted)["validation"]["reward"]["range"] == [0.0, 1.0]
    assert write_manifest(tmp_path, env).read_text().startswith("spec_version: 1")


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:  # the command prints its line before uvicorn binds the port
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            assert time.monotonic() < deadline, f"{url} never answered"
        time.sleep(0.1)
