"""``python -m envs validate`` reports every problem of a pack in one run: a manifest problem
does not hide the records' problems, a record's second problem is not hidden by its first, and
a bad gold does not stop the shallow-answer check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envs.__main__ import main
from envs.tools.validate import validate_folder

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PACK = ROOT / "examples" / "task-pack" / "grpo_example_pack"


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE_PACK, tmp_path / "pack"))


def rewrite(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    edit(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_manifest_record_and_gold_problems_are_all_reported(capsys, pack: Path) -> None:
    manifest = pack / "pack.toml"
    text = manifest.read_text()
    text = text.replace('description = "A dozen', 'descripton = "A dozen')  # misspelt key
    text = text.replace('license = "CC0-1.0"', "license = 1")
    manifest.write_text(text)

    def edit(rows: list[dict]) -> None:
        rows[0]["answer"] = "29 rolls"  # a gold that is no number literal
        del rows[2]["id"], rows[2]["answer"]  # two problems in one record
        rows[3]["id"] = rows[1]["id"]  # a duplicate id

    rewrite(pack / "train.jsonl", edit)
    train = pack / "train.jsonl"
    code = main(["validate", str(pack)])
    out = capsys.readouterr().out
    assert code == 1
    expected = [
        f"error: {manifest}: missing key 'description'",
        f"error: {manifest}: 'license' must be a str",
        f"error: {manifest}: unknown key 'descripton'",
        f"error: {train}:3: record has no 'id'",
        f"error: {train}:3: missing field(s): 'answer'",
        f"error: {train}:4: duplicate id 'garden-1' (first at {train}:2)",
        f"error: {train}:1: gold refused: '29 rolls' is not a number literal",
    ]
    for line in expected:
        assert line in out, out
    assert "REFUSED: pack 'example'" in out and f"{len(expected)} error(s)" in out
    # The other golds were still graded.
    assert "golds well-formed and accepted by their own verifier" in out
    report = validate_folder(pack)
    assert report.golds_passed == 12 - 3  # 12 tasks, 3 of them refused above


def test_a_record_with_no_gold_is_warned_about(tmp_path: Path) -> None:
    # A code pack's record without canonical_solution: its tests are never checked against a
    # reference, which validate says instead of passing it in silence. Graded without the
    # sandbox (--no-gold would skip the warning with the golds): a JSON pack shows the same.
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "pack.toml").write_text(
        'name = "j"\nversion = "1"\ndescription = "d"\nlicense = "MIT"\nsource = "s"\n'
        'env = "grpo/JsonSchema-v0"\nprompt_template = "Return {what} as JSON."\n'
        '[splits]\ntrain = "train.jsonl"\n')
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    (folder / "train.jsonl").write_text(
        json.dumps({"id": "a", "what": "seven", "schema": schema, "expected": {"n": 7}}) + "\n"
        + json.dumps({"id": "b", "what": "eight", "schema": schema}) + "\n")
    report = validate_folder(folder)
    assert report.golds_unchecked == 1
    assert [w.message for w in report.warnings if "no gold to check" in w.message]
    assert any("canonical_solution" in w.message for w in report.warnings)
