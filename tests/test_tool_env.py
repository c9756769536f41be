"""Multi-turn episodes with the sandboxed Python tool (envs.episode, envs.python_tool,
grpo/MathPython-v0): the contract the learner codes against, hostile tool code, sandbox
failures mid-episode, the turn limit, and single-turn envs unchanged."""

from __future__ import annotations

import json
import re
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

import envs
import envs.sandboxes
from envs.base import is_infra_error
from envs.python_tool import PythonTool
from sandbox import Limits, Sandbox

TASK = "arith/L2-0"  # What is 27 + 84?
CALL = "I will add them.\n```python\nprint(27 + 84)\n```"
QUICK = Limits(wall_s=2.0, cpu_s=2.0)
COUNTERS = {"turns", "tool_calls", "tool_errors", "tool_s"}


def math_python(sandbox=None, **kwargs):
    kwargs.setdefault("pack", "arith")
    kwargs.setdefault("level", 2)
    return gym.make("grpo/MathPython-v0", sandbox=sandbox, **kwargs).unwrapped


def call(code: str, before: str = "") -> str:
    return f"{before}```python\n{code}\n```"


# -- without Docker: the contract's text rules ----------------------------------------------

def test_single_turn_envs_are_unchanged():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=2).unwrapped
    assert env.max_turns == 1 and env.tool is None
    assert env.tool_call_end(CALL) is None
    assert "```python" not in env.prompt(env.pack.get(TASK))
    for completion in ("\\boxed{111}", CALL, "The answer is 110."):
        want = env.score(TASK, completion)
        assert env.episode(TASK).step(completion) == ("", *want[:1], True, False, want[1])
        env.reset(options={"task_id": TASK})
        obs, reward, terminated, truncated, info = env.step(completion)
        assert (obs, reward, terminated, truncated) == ("", want[0], True, False)
        assert info == want[1] and not COUNTERS & set(info)
    episode = env.episode(TASK)
    episode.step("\\boxed{111}")
    with pytest.raises(envs.EpisodeError, match="over"):
        episode.step("again")


def test_max_turns_needs_a_tool_and_is_checked():
    with pytest.raises(ValueError, match="needs a tool"):
        gym.make("grpo/MathExact-v0", pack="arith", max_turns=3)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            math_python(max_turns=bad)
    assert math_python().max_turns == 4 and math_python(max_turns=7).max_turns == 7
    # Any env takes the tool as an option.
    env = gym.make("grpo/MathExact-v0", pack="arith", python_tool=True, max_turns=2).unwrapped
    assert env.max_turns == 2 and env.tool_call_end(CALL) == len(CALL)
    with pytest.raises(TypeError, match="python_tool"):
        gym.make("grpo/MathExact-v0", pack="arith", python_tool="yes")
    with pytest.raises(ValueError, match="output_chars"):
        PythonTool(output_chars=0)


def test_tool_call_end_marks_where_a_turn_stops():
    env = math_python()
    assert env.tool_call_end(CALL) == len(CALL)
    assert env.tool_call_end(CALL + "\nThe sum is \\boxed{111}") == len(CALL)
    assert env.tool_call_end(call("print(1)") + call("print(2)")) == len(call("print(1)"))
    for tag in ("py", "python3", "Python"):
        text = f"```{tag}\nprint(1)\n```"
        assert env.tool_call_end(text) == len(text)
    for no_call in ("\\boxed{111}", "```python\nprint(1)\n", "```\nprint(1)\n```",
                    "```output\n3\n```", "So \\boxed{111}.\n" + CALL, "\\boxed{\\boxed{1}}" + CALL,
                    ""):
        assert env.tool_call_end(no_call) is None, no_call
    # As the turn grows, the first prefix with an end is exactly the complete call.
    ends = [env.tool_call_end(CALL[:i]) for i in range(len(CALL) + 1)]
    assert ends.index(len(CALL)) == len(CALL) and set(ends[:-1]) == {None}


def test_json_env_takes_the_tool_and_finds_its_own_final_answer():
    env = gym.make("grpo/JsonSchema-v0", python_tool=True).unwrapped
    assert env.max_turns == 4 and env.tool_call_end(CALL) == len(CALL)
    for answered in ('{"name": "Ada"}\n', '```json\n{"name": "Ada"}\n```\n'):
        assert env.tool_call_end(answered + CALL) is None


def test_code_env_takes_the_tool_and_grades_a_plain_block():
    env = gym.make("grpo/CodeTests-v0", python_tool=True).unwrapped
    assert env.tool_call_end(CALL) == len(CALL)
    assert env.tool_call_end("```\ndef add(a, b):\n    return a + b\n```") is None


def test_prompt_explains_the_tool_with_an_example_the_env_runs():
    env = math_python()
    prompt, info = env.reset(options={"task_id": TASK})
    assert prompt.startswith(env.pack.prompt(env.pack.get(TASK)))
    example = re.search(r"```python\n.*?```", prompt, re.DOTALL).group(0)
    assert env.tool_call_end(example) == len(example)
    assert env.tool.find_call(example).code.strip().startswith("print(")
    assert info["task_id"] == TASK
    # Perturbed prompts keep the tool: it is part of the env, not of the training format.
    variants = env.perturbations(TASK)
    assert variants and all(v.endswith(env.tool.instructions) for v in variants.values())


def test_final_turn_is_graded_alone_with_the_checkers_rules():
    env = math_python()
    # The tool text in the prompt is not "the question": a restated computation still fails.
    *_, info = env.episode(TASK).step("\\boxed{27 + 84}")
    assert info["reason"] == "restates_question" and info["rewards"]["correct"] == 0.0
    obs, reward, terminated, truncated, info = env.episode(TASK).step("The answer is 111.")
    assert (obs, terminated, truncated) == ("", True, False)
    assert info["reason"] == "not_boxed" and reward == 0.0  # require_boxed by default here
    *_, info = env.episode(TASK).step("\\boxed{111} or \\boxed{112}")
    assert info["reason"] == "multiple_answers"
    _, reward, _, _, info = env.episode(TASK).step("\\boxed{111}")
    assert reward == pytest.approx(1.1) and info["rewards"] == {"correct": 1.0, "format": 1.0}
    assert info["turns"] == 1 and info["tool_calls"] == 0 and info["truncated_turns"] is False


def test_unreachable_engine_ends_the_episode_as_an_infra_failure(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    monkeypatch.setattr(envs.sandboxes, "_shared", None)  # no pool started yet in this process
    env = math_python(max_turns=3)
    episode = env.episode(TASK)
    with pytest.warns(RuntimeWarning, match="python tool: the sandbox could not run a call"):
        obs, reward, terminated, truncated, info = episode.step(CALL)
    assert (obs, reward, terminated, truncated) == ("", 0.0, True, False)
    assert is_infra_error(info) and info["reason"] == "sandbox_error"
    assert "Docker engine" in info["verdict"].details["error"]
    assert info["turns"] == 1 and info["tool_calls"] == 1 and info["passed"] is False
    assert set(info["rewards"]) == {"correct", "format"}
    with pytest.raises(envs.EpisodeError):
        episode.step("\\boxed{111}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per tool: not again on the next call
        assert is_infra_error(env.episode(TASK).step(CALL)[-1])
    env.close()


# -- with Docker: tool calls run -------------------------------------------------------------

docker = pytest.mark.docker


@docker
def test_tool_call_then_boxed_answer(sandbox):
    env = math_python(sandbox)
    env.reset(options={"task_id": TASK})
    obs, reward, terminated, truncated, info = env.step(CALL)
    assert "111" in obs and obs.startswith("```output\n")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["turns"] == 1 and info["tool_calls"] == 1 and info["tool_errors"] == 0
    assert info["tool_status"] == "ok" and info["task_id"] == TASK
    obs, reward, terminated, truncated, info = env.step("\\boxed{111}")
    assert (obs, terminated, truncated) == ("", True, False)
    assert reward == pytest.approx(1.1) and info["passed"] is True
    assert info["turns"] == 2 and info["tool_calls"] == 1 and info["tool_errors"] == 0
    assert info["tool_s"] > 0 and info["truncated_turns"] is False
    with pytest.raises(envs.EpisodeError, match="reset"):
        env.step("\\boxed{111}")


def test_tool_ok_weight_needs_a_tool():
    with pytest.raises(ValueError, match="tool_ok"):
        gym.make("grpo/MathExact-v0", pack="arith", reward_weights={"tool_ok": 0.1})
    assert "tool_ok" not in math_python().reward_weights  # unweighted: not emitted
    assert math_python(reward_weights={"tool_ok": 0.1}).reward_weights["tool_ok"] == 0.1


@docker
def test_tool_ok_rewards_a_clean_call_only_when_weighted(sandbox):
    shaped = math_python(sandbox, reward_weights={"tool_ok": 0.1})
    episode = shaped.episode(TASK)
    episode.step(CALL)
    _, reward, _, _, info = episode.step("\\boxed{110}")  # wrong, after a clean call
    assert info["rewards"] == {"correct": 0.0, "format": 1.0, "tool_ok": 1.0}
    assert reward == pytest.approx(0.2) and info["passed"] is False
    for turns in ([call("print(x)")], [call("x = 1")], []):  # an error, no output, no call
        episode = shaped.episode(TASK)
        for turn in turns:
            episode.step(turn)
        _, reward, _, _, info = episode.step("\\boxed{111}")
        assert info["rewards"]["tool_ok"] == 0.0 and reward == pytest.approx(1.1), turns
    plain = math_python(sandbox).episode(TASK)  # unweighted: not reported, not paid
    plain.step(CALL)
    _, reward, _, _, info = plain.step("\\boxed{111}")
    assert "tool_ok" not in info["rewards"] and reward == pytest.approx(1.1)


@docker
def test_errors_are_observations_and_no_state_is_kept(sandbox):
    env = math_python(sandbox)
    episode = env.episode(TASK)
    obs, *_ = episode.step(call("x = 5\nprint(x)"))
    assert "5" in obs
    obs, reward, terminated, _, info = episode.step(call("print(x)"))
    assert "NameError" in obs and not terminated and reward == 0.0
    assert info["tool_status"] == "runtime_error" and info["tool_errors"] == 1
    obs, *_ = episode.step(call("x = 1"))
    assert "no output" in obs
    *_, info = episode.step("\\boxed{110}")
    assert info["tool_calls"] == 3 and info["tool_errors"] == 1 and info["turns"] == 4
    assert info["reason"] == "not_equal"


@docker
def test_turn_limit_grades_the_last_turn_as_given(sandbox):
    env = math_python(sandbox, max_turns=2)
    env.reset(options={"task_id": TASK})
    assert env.step(CALL)[2:4] == (False, False)
    obs, reward, terminated, truncated, info = env.step(call("print(111)"))
    assert (obs, terminated, truncated) == ("", False, True)
    assert info["truncated_turns"] is True and info["tool_calls"] == 1 and info["turns"] == 2
    assert info["rewards"]["correct"] == 0.0  # a number in code is no boxed answer
    assert not is_infra_error(info)
    with pytest.raises(envs.EpisodeError):
        env.step("\\boxed{111}")
    # The last turn is graded as given: a box after the call at the limit counts.
    episode = env.episode(TASK)
    episode.step(CALL)
    _, reward, _, truncated, info = episode.step(CALL + "\n\\boxed{111}")
    assert truncated and reward == pytest.approx(1.1)


@docker
def test_earlier_turns_never_count_toward_the_grade(sandbox):
    env = math_python(sandbox)
    episode = env.episode(TASK)
    # An answer after the call is text written before seeing the output: ignored.
    obs, _, terminated, _, _ = episode.step(CALL + "\nThe answer is \\boxed{111}")
    assert not terminated and "111" in obs
    obs, _, terminated, _, _ = episode.step(call("print('\\\\boxed{111}')"))
    assert not terminated and "\\boxed{111}" in obs
    _, reward, terminated, _, info = episode.step("I am not sure.")
    assert terminated and reward == 0.0 and info["passed"] is False


@docker
def test_output_is_cut_to_the_configured_size(sandbox):
    env = math_python(sandbox, tool_output_chars=200)
    obs, *_, info = env.episode(TASK).step(
        call("print('start'); print('x' * 20_000); print('the end')"))
    assert len(obs) < 300 and "characters cut" in obs
    assert "start" in obs and "the end" in obs and info["tool_status"] == "ok"


HOSTILE = {
    "fork_bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                  "        pass", ("timeout", "runtime_error")),
    "infinite_loop": ("while True:\n    pass", ("timeout",)),
    "output_flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 4096)",
                     ("output_limit", "timeout")),
    "kill_everything": ("import os, signal\nfor sig in (signal.SIGKILL, signal.SIGTERM):\n"
                        "    os.kill(-1, sig)\n    try:\n        os.kill(1, sig)\n"
                        "    except OSError:\n        pass\nprint('still here')", ("ok",)),
    "memory_bomb": ("x = []\nwhile True:\n    x.append(bytearray(50 * 1024 * 1024))",
                    ("memory_limit", "runtime_error")),
}


@docker
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_tool_code_is_contained(sandbox, name):
    code, statuses = HOSTILE[name]
    env = math_python(sandbox, tool_limits=QUICK, tool_output_chars=300)
    episode = env.episode(TASK)
    obs, reward, terminated, truncated, info = episode.step(call(code))
    assert info["tool_status"] in statuses, (name, info, obs)
    assert not terminated and not truncated and reward == 0.0 and len(obs) < 400
    assert info["tool_errors"] == (info["tool_status"] != "ok")
    # The episode and the pool go on: the next call runs normally.
    obs, _, terminated, _, info = episode.step(call("print(27 + 84)"))
    assert "111" in obs and info["tool_status"] == "ok" and not terminated


@docker
def test_tool_code_sees_no_host_files_secrets_or_network(sandbox, tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    monkeypatch.setenv("GRPO_TOOL_SECRET", "hunter2")
    code = (
        "import json, os, socket\n"
        "def attempt(fn):\n"
        "    try:\n        fn()\n        return 'yes'\n"
        "    except OSError as exc:\n        return type(exc).__name__\n"
        f"print(json.dumps({{'read': attempt(lambda: open({str(secret)!r}).read()),\n"
        "    'env': 'GRPO_TOOL_SECRET' in os.environ,\n"
        "    'net': attempt(lambda: socket.create_connection(('1.1.1.1', 53), timeout=1))}))")
    obs, *_, info = math_python(sandbox, tool_limits=QUICK).episode(TASK).step(call(code))
    assert info["tool_status"] == "ok", obs
    out = json.loads(obs.split("\n")[1])
    assert out == {"read": "FileNotFoundError", "env": False, "net": out["net"]}
    assert out["net"] != "yes" and "hunter2" not in obs


@docker
def test_closed_sandbox_mid_episode_is_an_infra_failure():
    with Sandbox(pool_size=1) as own:
        env = math_python(own)
        episode = env.episode(TASK)
        obs, *_ = episode.step(CALL)
        assert "111" in obs
    obs, reward, terminated, truncated, info = episode.step(CALL)  # the sandbox is closed now
    assert (obs, reward, terminated, truncated) == ("", 0.0, True, False)
    assert is_infra_error(info) and info["turns"] == 2 and info["tool_calls"] == 2
    assert info["truncated_turns"] is False


@docker
def test_episodes_step_concurrently_from_threads(sandbox):
    env = math_python(sandbox)
    ids = [f"arith/L2-{i}" for i in range(6)]
    answers = [env.pack.get(i)["answer"] for i in ids]
    exprs = [env.pack.get(i)["expression"] for i in ids]
    episodes = [env.episode(i) for i in ids]
    with ThreadPoolExecutor(6) as ex:
        obs = list(ex.map(lambda e, x: e.step(call(f"print({x})"))[0], episodes, exprs))
        finals = list(ex.map(lambda e, o: e.step(f"\\boxed{{{o.splitlines()[1]}}}"),
                             episodes, obs))
    assert [o.splitlines()[1] for o in obs] == answers
    assert [f[1] for f in finals] == [pytest.approx(1.1)] * 6


@docker
def test_shared_pool_is_released_by_close(monkeypatch):
    for name, fresh in (("_shared", None), ("_users", 0), ("_pinned", False)):
        monkeypatch.setattr(envs.sandboxes, name, fresh)  # whatever earlier tests started
    env = math_python()  # the process-wide pool
    assert "111" in env.episode(TASK).step(CALL)[0]
    pool = env.tool._acquired
    assert pool is not None and pool.containers()
    env.close()
    assert envs.sandboxes._shared is None
    # A container still starting when the pool closed is removed by its start thread.
    deadline = time.monotonic() + 30
    while pool.containers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pool.containers() == []


@docker
def test_vector_envs_run_tool_episodes(monkeypatch):
    # No pool alive when AsyncVectorEnv forks its workers (each then starts its own): one
    # inherited from the parent is refused by ``Sandbox.run`` (see the test below).
    for name, fresh in (("_shared", None), ("_users", 0), ("_pinned", False)):
        monkeypatch.setattr(envs.sandboxes, name, fresh)
    fns = [lambda: gym.make("grpo/MathPython-v0", pack="arith", level=2,
                            tool_limits=QUICK)] * 2
    for vec in (gym.vector.SyncVectorEnv(fns),
                gym.vector.AsyncVectorEnv(fns, shared_memory=False)):
        _, infos = vec.reset(options={"task_id": TASK})
        obs, rewards, terminated, truncated, infos = vec.step((CALL, call("print(1 / 0)")))
        assert "111" in obs[0] and "ZeroDivisionError" in obs[1]
        assert list(rewards) == [0.0, 0.0] and not any(terminated) and not any(truncated)
        assert list(infos["tool_errors"]) == [0, 1]
        _, rewards, terminated, _, infos = vec.step(("\\boxed{111}", "\\boxed{112}"))
        assert list(rewards) == [pytest.approx(1.1), pytest.approx(0.1)] and all(terminated)
        assert list(infos["turns"]) == [2, 2]
        vec.close()


@docker
def test_a_sandbox_inherited_through_fork_is_refused_not_shared(sandbox):
    """A forked child must not talk over the parent's engine connections (replies would
    interleave): its runs are infrastructure errors, the parent's pool keeps working, and the
    child's shared pool is its own."""
    import multiprocessing

    def child(queue):
        result = sandbox.run("print(5)")
        queue.put((result.status, result.error, envs.sandboxes._shared is None))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    status, error, fresh_shared = queue.get(timeout=120)
    proc.join(timeout=60)
    assert status == "sandbox_error" and "forked process" in error
    assert fresh_shared
    assert sandbox.run("print(2)").stdout == "2\n"


@docker
def test_a_forked_child_never_closes_the_parents_containers(sandbox):
    """A child that closes its inherited copy, or exits through atexit with it in the live set,
    leaves the parent's warm containers alone."""
    import multiprocessing

    import sandbox.runner as runner

    assert sandbox.run("print(1)").stdout == "1\n"
    deadline = time.monotonic() + 60
    while any(p["starting"] for p in sandbox.pool_state()) and time.monotonic() < deadline:
        time.sleep(0.1)  # the pool refills after a run: compare once it is settled
    before = set(sandbox.containers())
    assert before

    def child(queue):
        inherited_live = sandbox in runner._live
        sandbox.close()
        runner._close_all()  # what atexit runs
        queue.put(inherited_live)

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    assert queue.get(timeout=120) is False  # the child's live set starts empty
    proc.join(timeout=60)
    assert set(sandbox.containers()) == before
    assert sandbox.run("print(3)").stdout == "3\n"


# -- what a tool call leaves in its container is its own failure, never an infra error -------
# (issue 31: a deep tree made the agent's recursive clean-up raise, and the call came back as
# sandbox_error, which ends the episode unscored: a way out of any penalty)
LEFTOVERS = ("import os\n"
             "for _ in range(1500):\n"
             "    os.mkdir('d')\n"
             "    os.chdir('d')\n"
             "os.mkfifo('p')\n"
             "os.chmod('/scratch/d', 0)\n"
             "print('deep')\n"
             "raise SystemExit(1)")


@docker
def test_a_tool_call_that_leaves_a_deep_tree_is_its_own_failure_math(sandbox):
    env = math_python(sandbox)
    episode = env.episode(TASK)
    obs, reward, terminated, _, info = episode.step(call(LEFTOVERS))
    assert info["tool_status"] == "runtime_error" and not is_infra_error(info), (info, obs)
    assert "deep" in obs and not terminated and reward == 0.0 and info["tool_errors"] == 1
    obs, *_ = episode.step(CALL)  # the next call, on the same pool, runs clean
    assert "111" in obs
    _, reward, terminated, _, info = episode.step("\\boxed{110}")  # scored as wrong, not dropped
    assert terminated and info["reason"] == "not_equal" and info["rewards"]["correct"] == 0.0
    assert not is_infra_error(info) and info["passed"] is False


@docker
def test_a_tool_call_that_leaves_a_deep_tree_is_its_own_failure_json(sandbox):
    env = gym.make("grpo/JsonSchema-v0", python_tool=PythonTool(sandbox=sandbox)).unwrapped
    episode = env.episode("extract/test-L1-people-0")
    obs, reward, terminated, _, info = episode.step(call(LEFTOVERS))
    assert info["tool_status"] == "runtime_error" and not is_infra_error(info), (info, obs)
    assert "deep" in obs and not terminated and reward == 0.0
    obs, *_ = episode.step(CALL)
    assert "111" in obs
    _, reward, terminated, _, info = episode.step('{"x": 1}')  # wrong: scored, not dropped
    assert terminated and not is_infra_error(info) and info["passed"] is False
    assert info["reason"] == "schema_invalid"
