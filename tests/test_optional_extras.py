"""Every integration that needs an optional extra says which one, with its pip command, when the
extra is absent (``datasets`` included): the extras are made absent in a fresh process by an
import hook, since the dev install has them all."""

import json
import subprocess
import sys
from pathlib import Path

from envs.extras import MissingExtraError, require

ROOT = Path(__file__).resolve().parents[1]

# Each case: (what it calls, the extra its message must name). Run in one process where the
# optional distributions cannot be imported.
WALK = r'''
import json, sys

ABSENT = {"datasets", "trl", "openenv", "ray", "reasoning_gym", "vllm", "deepspeed"}


class Absent:
    """Import hook: these top-level packages are not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Absent())

import gymnasium as gym
import envs


def trl_dataset():
    from envs.tools.integrations import trl as grpo_trl
    grpo_trl.dataset("grpo/MathExact-v0", pack="arith", level=1, size=2)


def verl_parquet():
    from envs.tools.integrations import verl
    verl.write_parquet("grpo/MathExact-v0", "out.parquet", pack="arith", level=1, size=2)


def served_dataset():
    from envs.tools.integrations.trl_openenv import task_dataset
    task_dataset("http://127.0.0.1:9", 2)


def served_episode():
    from envs.tools.integrations.trl_openenv import ServedEpisode
    ServedEpisode("http://127.0.0.1:9")


def ray_scoring():
    import envs.ray_scoring  # noqa: F401


def openenv_server():
    from envs.tools.serve.app import build_app  # noqa: F401


def openenv_env():
    gym.make("grpo/OpenEnv-v0", base_url="http://127.0.0.1:9")


def reasoning_gym_env():
    gym.make("grpo/ReasoningGym-v0", task="chain_sum")


out = {}
for case in (trl_dataset, verl_parquet, served_dataset, served_episode, ray_scoring,
             openenv_server, openenv_env, reasoning_gym_env):
    try:
        case()
        out[case.__name__] = "no error"
    except ImportError as exc:
        out[case.__name__] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
'''

WANT = {
    "trl_dataset": "trl",
    "verl_parquet": "verl",
    "served_dataset": "trl",
    "served_episode": "openenv",
    "ray_scoring": "ray",
    "openenv_server": "openenv",
    "openenv_env": "openenv",
    "reasoning_gym_env": "reasoning-gym",
}


def test_every_integration_names_its_extra_when_it_is_absent(tmp_path):
    run = subprocess.run([sys.executable, "-c", WALK], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(got) == set(WANT)
    for case, extra in WANT.items():
        message = got[case]
        assert f'pip install -e ".[{extra}]"' in message, (case, message)
        assert "\n" not in message, (case, message)


def test_require_names_the_extra_and_stays_a_module_not_found_error():
    assert require("json", "x", "y") is json
    try:
        require("no_such_module_here", "trl", "grpo_trl.dataset")
    except ModuleNotFoundError as exc:
        assert isinstance(exc, MissingExtraError) and exc.name == "no_such_module_here"
        assert str(exc) == ('grpo_trl.dataset needs the trl extra (no_such_module_here is not '
                            'installed): pip install -e ".[trl]"')
    else:
        raise AssertionError("no error for a missing module")
