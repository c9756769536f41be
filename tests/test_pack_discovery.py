"""Discovery of third-party packs and envs through entry points, with fake distributions.

Each fake distribution is a ``<name>-0.1.dist-info`` folder (``METADATA`` + ``entry_points.txt``)
plus its modules, in a temporary folder put on ``sys.path``.
"""

import importlib
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import envs
from envs import registration
from envs.registration import DuplicateEnvError, register_all
from tasks import PackError, load_pack, pack_sources
from tasks import registry as pack_registry

MATH_PACK = """
name = "{name}"
version = "0.2.0"
description = "d"
license = "MIT"
source = "hand-written"
env = "grpo/MathExact-v0"
prompt_template = "{{question}}"
[splits]
train = "train.jsonl"
test = "test.jsonl"
"""


def fake_dist(site, dist, *, packs=None, envs_=None, modules=None):
    """Write a distribution ``dist`` with entry points into ``site``."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = []
    for group, entries in (("grpo_gym.packs", packs), ("grpo_gym.envs", envs_)):
        if entries:
            lines.append(f"[{group}]")
            lines += [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for relative, text in (modules or {}).items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def pack_package(name, package):
    return {
        f"{package}/__init__.py": "",
        f"{package}/pack.toml": MATH_PACK.format(name=name),
        f"{package}/train.jsonl": '{"id": 1, "question": "1+2", "answer": "3"}\n',
        f"{package}/test.jsonl": '{"id": 2, "question": "2+2", "answer": "4"}\n',
    }


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for fake distributions; discovery caches and registries restored."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    registry_before = dict(gym.registry)
    sources_before = dict(registration._sources)

    def clear():
        importlib.invalidate_caches()
        pack_sources.cache_clear()
        pack_registry._load.cache_clear()

    clear()
    yield folder
    monkeypatch.undo()
    for env_id in set(gym.registry) - set(registry_before):
        del gym.registry[env_id]
    gym.registry.update(registry_before)
    registration._sources.clear()
    registration._sources.update(sources_before)
    clear()


# -- packs ---------------------------------------------------------------------------------------
def test_pack_entry_point_is_discovered_and_loads(site):
    fake_dist(site, "fake-pack", packs={"tiny": "fake_tiny_pack"},
              modules=pack_package("tiny-ep", "fake_tiny_pack"))
    src = pack_sources()["tiny-ep"]
    assert src.origin == "distribution fake-pack"
    pack = load_pack("tiny-ep")
    assert pack.origin == "distribution fake-pack"
    assert pack.ids("train") == ["tiny-ep/1"]
    env = gym.make("grpo/MathExact-v0", pack="tiny-ep", split="test")
    _, info = env.reset(seed=0)
    assert info["pack"] == "tiny-ep" and info["pack_version"].startswith("0.2.0+")
    _, reward, *_ = env.step("\\boxed{4}")
    assert reward == pytest.approx(1.1)


def test_pack_entry_point_with_attribute_path(site):
    modules = pack_package("attr-pack", "fake_attr_data")
    modules["fake_attr_mod.py"] = """
        from pathlib import Path
        import fake_attr_data
        def folder():
            return Path(fake_attr_data.__file__).parent
    """
    fake_dist(site, "fake-attr", packs={"p": "fake_attr_mod:folder"}, modules=modules)
    assert pack_sources()["attr-pack"].origin == "distribution fake-attr"


@pytest.mark.parametrize("target, modules", [
    ("no_such_module_xyz", {}),  # the module is not importable
    ("fake_bad_manifest", {"fake_bad_manifest/__init__.py": "",
                           "fake_bad_manifest/pack.toml": 'name = "x"\n'}),
    ("fake_raises", {"fake_raises/__init__.py": "raise RuntimeError('boom at import')"}),
])
def test_broken_pack_entry_point_warns_naming_the_distribution(site, target, modules):
    fake_dist(site, "broken-pack-dist", packs={"bad": target}, modules=modules)
    with pytest.warns(RuntimeWarning, match="distribution 'broken-pack-dist'"):
        sources = pack_sources()
    assert "gsm8k" in sources  # the built-in packs are unaffected


def test_duplicate_pack_name_names_both_sources(site):
    fake_dist(site, "shadow-dist", packs={"gsm8k": "fake_shadow"},
              modules=pack_package("gsm8k", "fake_shadow"))
    with pytest.raises(PackError, match=r"duplicate pack name 'gsm8k': built-in .* and "
                                        r"distribution shadow-dist"):
        pack_sources()


def test_duplicate_pack_name_between_two_distributions(site):
    fake_dist(site, "first-dist", packs={"a": "fake_first"},
              modules=pack_package("same-name", "fake_first"))
    fake_dist(site, "second-dist", packs={"b": "fake_second"},
              modules=pack_package("same-name", "fake_second"))
    with pytest.raises(PackError, match="duplicate pack name 'same-name'") as err:
        pack_sources()
    assert "first-dist" in str(err.value) and "second-dist" in str(err.value)


# -- envs ----------------------------------------------------------------------------------------
ENV_MODULE = """
    import gymnasium as gym
    from envs.domains.math_exact import MathExactEnv

    class OtherMath(MathExactEnv):
        env_id = ""

    def register_with_gym(env_id="{env_id}"):
        gym.register(id=env_id, entry_point="{module}:OtherMath")

    def register_with_envs(env_id="{env_id}"):
        from envs import register
        register(env_id, "{module}:OtherMath")

    def broken():
        gym.register(id="fake/HalfDone-v0", entry_point="{module}:OtherMath")
        raise RuntimeError("plugin exploded")
"""


def env_dist(site, dist, module, env_id, function):
    fake_dist(site, dist, envs_={"e": f"{module}:{function}"},
              modules={f"{module}.py": ENV_MODULE.format(env_id=env_id, module=module)})


def test_env_entry_point_registers_with_its_source(site):
    env_dist(site, "fake-env-dist", "fake_env_ok", "fake/Math-v0", "register_with_gym")
    register_all()
    assert envs.env_sources()["fake/Math-v0"] == "distribution fake-env-dist"
    env = gym.make("fake/Math-v0", pack="arith", level=1)
    assert env.reset(seed=0)[1]["pack"] == "arith"
    register_all()  # running the plugins again is not a clash with themselves
    assert envs.env_sources()["fake/Math-v0"] == "distribution fake-env-dist"


def test_env_registered_through_envs_register_is_attributed(site):
    env_dist(site, "fake-env-dist2", "fake_env_ok2", "fake/Math2-v0", "register_with_envs")
    register_all()
    assert envs.env_sources()["fake/Math2-v0"] == "distribution fake-env-dist2"


def test_broken_env_entry_point_warns_and_leaves_no_trace(site):
    env_dist(site, "exploding-dist", "fake_env_broken", "unused/X-v0", "broken")
    with pytest.warns(RuntimeWarning, match="distribution 'exploding-dist'.*plugin exploded"):
        register_all()
    assert "fake/HalfDone-v0" not in gym.registry


def test_missing_env_module_warns_naming_the_distribution(site):
    fake_dist(site, "ghost-dist", envs_={"g": "no_such_module_abc:register"})
    with pytest.warns(RuntimeWarning, match="distribution 'ghost-dist'"):
        register_all()


@pytest.mark.parametrize("function", ["register_with_gym", "register_with_envs"])
def test_env_id_clashing_with_a_builtin_is_an_error(site, function):
    builtin_spec = gym.registry["grpo/MathExact-v0"]
    env_dist(site, "clash-dist", f"fake_clash_{function}", "grpo/MathExact-v0", function)
    with pytest.raises(DuplicateEnvError, match=r"'grpo/MathExact-v0' is registered by both "
                                                r"built-in and distribution clash-dist"):
        register_all()
    # gymnasium would have replaced the built-in silently; the clash is undone instead.
    assert gym.registry["grpo/MathExact-v0"] is builtin_spec
    assert envs.env_sources()["grpo/MathExact-v0"] == "built-in"


def test_env_id_clash_between_two_distributions_names_both(site):
    env_dist(site, "one-dist", "fake_one", "fake/Shared-v0", "register_with_gym")
    env_dist(site, "two-dist", "fake_two", "fake/Shared-v0", "register_with_gym")
    with pytest.raises(DuplicateEnvError, match="'fake/Shared-v0'") as err:
        register_all()
    assert "distribution one-dist" in str(err.value)
    assert "distribution two-dist" in str(err.value)


def test_env_id_clash_with_a_gymnasium_env_is_an_error(site):
    env_dist(site, "cartpole-dist", "fake_cart", "CartPole-v1", "register_with_envs")
    with pytest.raises(DuplicateEnvError, match="'CartPole-v1'.*earlier registration"):
        register_all()
    assert "cartpole" in gym.registry["CartPole-v1"].entry_point


def test_import_envs_survives_a_broken_plugin(site):
    fake_dist(site, "crashy-dist", envs_={"c": "no_such_module_q:register"},
              packs={"c": "no_such_module_q"})
    code = "import envs; from tasks import pack_sources; print(sorted(pack_sources())[0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(site)},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "arith"
    assert done.stderr.count("distribution 'crashy-dist'") == 2  # one env, one pack warning
