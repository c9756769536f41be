"""The pack index behind ``python -m envs list``: sizes and versions without loading a pack
whose sources did not change, and loaded again when they did; extras not installed are named."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tasks.index
from tasks.registry import PackSource

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PACK = ROOT / "examples" / "task-pack" / "grpo_example_pack"


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The example pack as the only known pack, and an empty cache folder."""
    folder = Path(shutil.copytree(EXAMPLE_PACK, tmp_path / "pack"))
    monkeypatch.setenv("GRPO_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tasks.index, "pack_sources",
                        lambda: {"example": PackSource("example", folder, "built-in")})
    return folder


def loads_counted(monkeypatch) -> list[Path]:
    loaded: list[Path] = []
    real = tasks.index.load_folder

    def counting(folder, **kwargs):
        loaded.append(Path(folder))
        return real(folder, **kwargs)

    monkeypatch.setattr(tasks.index, "load_folder", counting)
    return loaded


def test_a_second_listing_loads_no_pack(example, monkeypatch):
    loaded = loads_counted(monkeypatch)
    first = tasks.index.pack_summaries()["example"]
    assert first.sizes == {"train": 8, "test": 4} and first.version.startswith("0.1.0+")
    assert first.env == "grpo/MathExact-v0" and loaded == [example]
    again = tasks.index.pack_summaries()["example"]
    assert again == first and loaded == [example]  # from the index, not loaded again
    assert json.loads(tasks.index.index_path().read_text())["packs"][f"example {example}"][
        "sizes"] == {"train": 8, "test": 4}


def test_a_changed_data_file_or_manifest_loads_the_pack_again(example, monkeypatch):
    loaded = loads_counted(monkeypatch)
    before = tasks.index.pack_summaries()["example"]
    lines = (example / "test.jsonl").read_text().splitlines()
    (example / "test.jsonl").write_text("\n".join(lines[:2]) + "\n")
    after = tasks.index.pack_summaries()["example"]
    assert after.sizes == {"train": 8, "test": 2} and after.version != before.version
    manifest = example / "pack.toml"
    manifest.write_text(manifest.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    assert tasks.index.pack_summaries()["example"].version.startswith("0.2.0+")
    assert len(loaded) == 3


def test_a_changed_installed_data_file_loads_the_pack_again(example, monkeypatch, tmp_path):
    # A loader's data read through package_file (an installed package's file) is a dependency.
    data = tmp_path / "installed.jsonl"
    data.write_text((example / "train.jsonl").read_text())
    real = tasks.index.load_folder

    def reads_installed(folder, **kwargs):
        tasks.sources._reads.append(data)  # what package_file records
        return real(folder, **kwargs)

    monkeypatch.setattr(tasks.index, "load_folder", reads_installed)
    entry = tasks.index.pack_summaries() and json.loads(
        tasks.index.index_path().read_text())["packs"][f"example {example}"]
    assert entry["deps"][0][0] == str(data)
    loaded = loads_counted(monkeypatch)
    tasks.index.pack_summaries()
    assert loaded == []
    data.write_text(data.read_text() + "\n")  # another size
    tasks.index.pack_summaries()
    assert loaded == [example]


def test_a_corrupt_or_unwritable_index_only_costs_the_time(example, monkeypatch, tmp_path):
    path = tasks.index.index_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert tasks.index.pack_summaries()["example"].sizes["test"] == 4
    monkeypatch.setenv("GRPO_GYM_CACHE", "/proc/no-such-folder")
    assert tasks.index.pack_summaries()["example"].sizes["test"] == 4


def test_list_names_the_extras_that_are_not_installed():
    code = ("import sys; sys.modules['reasoning_gym'] = None; sys.modules['openenv'] = None\n"
            "from envs.__main__ import main\nraise SystemExit(main(['list']))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    openenv = next(line for line in lines if line.split()[:1] == ["grpo/OpenEnv-v0"])
    assert 'not installed: pip install -e ".[openenv]"' in openenv
    rg_env = next(line for line in lines if line.split()[:1] == ["grpo/ReasoningGym-v0"])
    assert 'not installed: pip install -e ".[reasoning-gym]"' in rg_env
    header = next(line for line in lines if line.startswith("reasoning-gym "))
    assert 'NOT INSTALLED: pip install -e ".[reasoning-gym]"' in header
    math = next(line for line in lines if line.split()[:1] == ["grpo/MathExact-v0"])
    assert "not installed" not in math
