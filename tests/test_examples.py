"""The shipped examples: a third-party task pack and a new domain, installed into a fresh venv."""

import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import load_folder

ROOT = Path(__file__).resolve().parents[1]
TASK_PACK = ROOT / "examples" / "task-pack"
NEW_DOMAIN = ROOT / "examples" / "new-domain"
DOMAIN_FILE = NEW_DOMAIN / "grpo_unit_convert" / "env.py"
DOMAIN_PACK = NEW_DOMAIN / "grpo_unit_convert" / "pack"


# -- the new domain, imported straight from its file ---------------------------------------------
@pytest.fixture
def unit_env(monkeypatch):
    monkeypatch.syspath_prepend(str(NEW_DOMAIN))
    from grpo_unit_convert.env import UnitConvertEnv

    return UnitConvertEnv(pack=load_folder(DOMAIN_PACK))


def test_the_domain_is_one_short_file():
    assert len(DOMAIN_FILE.read_text().splitlines()) <= 80


def test_every_gold_passes_and_earns_full_reward(unit_env):
    pack = unit_env.pack
    for split in pack.splits:
        for i in range(pack.size(split)):
            task = pack.task_at(split, i)
            reward, info = unit_env.score(task, unit_env.gold_completion(task))
            assert info["passed"] and reward == pytest.approx(1.1), task.id


@pytest.mark.parametrize("completion, correct, fmt, reason", [
    ("5 mi = 5 * 1.609344 km\nAnswer: 8.047 km", 1.0, 1.0, "equal"),  # rounding is tolerated
    ("Answer: 8.1 km", 0.0, 1.0, "not_equal"),  # beyond the 1e-3 tolerance
    ("Answer: 8.04672 kilometres", 1.0, 0.0, "equal"),  # the wrong unit symbol costs format
    ("Answer: 3 km\nOn reflection:\nAnswer: 8.04672 km.", 1.0, 1.0, "equal"),  # last line wins
    ("It is about 8 km.", 0.0, 0.0, "no_answer"),
    ("Answer: 1,000,000 km", 0.0, 1.0, "not_equal"),
])
def test_grading(unit_env, completion, correct, fmt, reason):
    task = unit_env.pack.get("mi-km-5")
    _, info = unit_env.score(task, completion)
    assert info["rewards"] == {"correct": correct, "format": fmt}
    assert info["reason"] == reason


def test_the_domain_brings_its_own_perturbations_and_checks(unit_env):
    task = unit_env.pack.get("mi-km-5")
    prompts = unit_env.perturbations(task)
    assert len(prompts) >= 2 and "plain_question" in prompts
    assert not any("boxed" in p for p in prompts.values())  # nothing math-shaped
    assert prompts["plain_question"] == "How much is 5 miles in kilometres? Give the number in km."
    assert unit_env.check_components == ("correct",)


def test_a_task_can_demand_an_exact_answer(unit_env):
    task = unit_env.pack.get("h-s-2.5")  # rel_tol 0
    assert unit_env.score(task, "Answer: 9000 s")[1]["passed"]
    assert not unit_env.score(task, "Answer: 9000.5 s")[1]["passed"]


# -- both examples installed as distributions into a fresh venv ----------------------------------
@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv over this interpreter's packages (grpo-gym included) with both examples added.

    The examples are copied first so that building them leaves nothing in the repository.
    """
    root = tmp_path_factory.mktemp("examples")
    for src in (TASK_PACK, NEW_DOMAIN):
        shutil.copytree(src, root / src.name, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
                   check=True, timeout=300)
    python = root / "venv" / "bin" / "python"
    # The venv sees this interpreter's packages (pip, grpo-gym's editable install) even when
    # this interpreter is itself a venv, which --system-site-packages would skip: a .pth line
    # adds them as a site dir (so their own .pth files, the editable finder, run too). pip
    # then installs into the venv, and the build needs no network (setuptools is installed).
    venv_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip()
    parents = [d for d in site.getsitepackages() if Path(d).is_dir()]
    Path(venv_site, "_parent_site.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in parents))
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", str(root / "task-pack"),
                    str(root / "new-domain")], check=True, timeout=600, cwd=root)
    return python, root


def in_venv(venv, *args):
    python, root = venv
    # cwd outside the repository: grpo-gym and the examples must come from the installs.
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=root,
                          timeout=600)


@pytest.mark.slow
def test_installed_examples_show_up_in_envs_list(venv):
    done = in_venv(venv, "-m", "envs", "list")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    example = rows["example"]
    assert "grpo/MathExact-v0" in example and "train 8, test 4" in example
    assert " 0.1.0+" in example and example.endswith("distribution grpo-gym-example-pack")
    assert rows["unitconv/Convert-v0"].endswith("distribution grpo-gym-unit-convert")
    assert rows["unit-conversion"].endswith("distribution grpo-gym-unit-convert")
    assert rows["gsm8k"].endswith("built-in")


@pytest.mark.slow
def test_installed_examples_work_with_gym_make(venv):
    code = """
import json
import gymnasium as gym
import envs  # registers the envs, the plugins' included

env = gym.make("grpo/MathExact-v0", pack="example", split="test")
prompt, info = env.reset(options={"task_id": "example/pizza-1"})
_, reward, done, _, info = env.step("30 slices / 5 friends = \\\\boxed{6}")
unit = gym.make("unitconv/Convert-v0")
unit_prompt, unit_info = unit.reset(seed=0)
gold = unit.unwrapped.gold_completion(unit.unwrapped.pack.get(unit_info["task_id"]))
_, unit_reward, *_ = unit.step(gold)
print(json.dumps({"prompt": prompt, "reward": reward, "done": done, "info": info["pack_version"],
                  "passed": info["passed"], "unit_pack": unit_info["pack"],
                  "unit_reward": unit_reward}))
"""
    done = in_venv(venv, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["prompt"].startswith("Five friends share 3 pizzas")
    assert out["passed"] and out["done"] and out["reward"] == pytest.approx(1.2)  # format 0.2
    assert out["info"].startswith("0.1.0+")
    assert out["unit_pack"] == "unit-conversion" and out["unit_reward"] == pytest.approx(1.1)


@pytest.mark.slow
def test_installed_domain_pack_validates(venv):
    # The validator grades the pack with the plugin's env, so the env must be registered.
    done = in_venv(venv, "-m", "envs", "validate", str(DOMAIN_PACK))
    assert done.returncode == 0, done.stdout
    assert "OK: pack 'unit-conversion' (unitconv/Convert-v0)" in done.stdout
    assert "10 golds well-formed and accepted by their own verifier" in done.stdout


@pytest.mark.slow
def test_evaluation_gates_use_the_domains_own_perturbations(venv, tmp_path):
    # What is checked is which perturbations ran, on which tasks, with which prompts: a few
    # new tokens per answer do (the answers' accuracy is not asserted).
    out = tmp_path / "eval"
    done = in_venv(venv, "-m", "learner.eval", "--env", "unitconv/Convert-v0", "--limit", "4",
                   "--group-size", "2", "--max-new-tokens", "8", "--general-limit", "0",
                   "--output-dir", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "report.json").read_text())["perturbations"]["results"]
    assert set(results) == {"original", "paraphrase", "no_instruction", "irrelevant_context",
                            "plain_question"}
    assert {r["n"] for r in results.values()} == {3}  # the whole test split: 3 tasks
    assert "boxed" not in results["plain_question"]["example_prompt"]


@pytest.mark.slow
def test_corrupted_copy_of_the_installed_pack_is_refused(venv, tmp_path):
    python, root = venv
    locate = in_venv(venv, "-c", "import grpo_example_pack, os; "
                                 "print(os.path.dirname(grpo_example_pack.__file__))")
    installed = Path(locate.stdout.strip())
    assert "site-packages" in installed.parts  # the copy the venv installed, not the source
    bad = Path(shutil.copytree(installed, tmp_path / "bad"))
    lines = (bad / "test.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"answer"', '"answr"')
    lines.append(lines[0])  # a duplicated id
    (bad / "test.jsonl").write_text("\n".join(lines) + "\n{oops\n")
    done = in_venv(venv, "-m", "envs", "validate", str(bad))
    assert done.returncode == 1
    test_file = bad / "test.jsonl"
    assert f"{test_file}:2: missing field(s): 'answer'" in done.stdout
    assert f"{test_file}:5: duplicate id 'train-1' (first at {test_file}:1)" in done.stdout
    assert f"{test_file}:6: invalid JSON" in done.stdout
    assert "REFUSED" in done.stdout and "3 error(s)" in done.stdout
