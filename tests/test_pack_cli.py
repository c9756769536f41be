"""``python -m envs list / validate / show`` and the pack validator behind ``validate``."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from envs.__main__ import main
from envs.base import TaskEnv
from envs.tools.validate import validate_folder
from envs.verify.verdict import Verdict
from tasks import pack_sources

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PACK = ROOT / "examples" / "task-pack" / "grpo_example_pack"


@pytest.fixture
def pack(tmp_path):
    """A fresh copy of the example pack, to corrupt."""
    return Path(shutil.copytree(EXAMPLE_PACK, tmp_path / "pack"))


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- validate: the example pack and corrupted copies ---------------------------------------------
def test_example_pack_is_valid(capsys, pack):
    code, out = run(capsys, "validate", str(pack))
    assert code == 0, out
    assert "OK: pack 'example' (grpo/MathExact-v0): 12 tasks checked (train 8, test 4)" in out
    assert ("12 golds well-formed and accepted by their own verifier (form is checked, not "
            "correctness); 0 error(s)") in out
    assert "pack_version: 0.1.0+" in out


def test_bad_json_line_is_refused_with_file_and_line(capsys, pack):
    lines = (pack / "train.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-1]  # drop the closing brace
    write_lines(pack / "train.jsonl", lines)
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    assert f"error: {pack / 'train.jsonl'}:3: invalid JSON" in out
    assert "REFUSED" in out and "1 error(s)" in out


def test_missing_field_is_refused_with_file_and_line(capsys, pack):
    rows = records(pack / "test.jsonl")
    del rows[1]["answer"]
    del rows[3]["question"]
    write_lines(pack / "test.jsonl", [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    assert (f"{pack / 'test.jsonl'}:2: missing field(s): 'answer' (needed by "
            "grpo/MathExact-v0)") in out
    assert f"{pack / 'test.jsonl'}:4: missing field(s): 'question' (needed by the prompt" in out


def test_duplicate_id_is_refused_naming_both_places(capsys, pack):
    rows = records(pack / "test.jsonl")
    rows[0]["id"] = "bakery-1"  # already used in train.jsonl line 1
    write_lines(pack / "test.jsonl", [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    assert (f"{pack / 'test.jsonl'}:1: duplicate id 'bakery-1' (first at "
            f"{pack / 'train.jsonl'}:1)") in out


def test_every_error_is_listed_not_just_the_first(capsys, pack):
    lines = (pack / "train.jsonl").read_text().splitlines()
    lines[0] = "{broken"
    lines[4] = "[1, 2]"
    lines.append(json.dumps({"id": "no-answer", "question": "What is 2 + 2?"}))
    lines.append(json.dumps({"question": "no id here", "answer": "1"}))
    write_lines(pack / "train.jsonl", lines)
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    train = pack / "train.jsonl"
    for expected in (f"{train}:1: invalid JSON", f"{train}:5: a record must be a JSON object",
                     f"{train}:9: missing field(s): 'answer'", f"{train}:10: record has no 'id'"):
        assert expected in out
    assert "4 error(s)" in out


def test_golds_that_fail_their_verifier_are_refused(capsys, pack):
    # A gold the checker cannot match could never be earned: training on it teaches noise.
    rows = records(pack / "train.jsonl")
    rows[0]["answer"] = "29 rolls"  # a unit in the answer: no completion can equal it
    rows[5]["answer"] = "?"
    write_lines(pack / "train.jsonl", [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    assert (f"{pack / 'train.jsonl'}:1: gold refused: '29 rolls' is not a number literal"
            in out)
    assert f"{pack / 'train.jsonl'}:6: gold refused: '?' is not a number literal" in out
    assert "10 golds well-formed and accepted by their own verifier" in out and "2 error(s)" in out


def test_same_prompt_in_two_splits_is_refused(capsys, pack):
    rows = records(pack / "test.jsonl")
    rows[1]["question"] = records(pack / "train.jsonl")[4]["question"]
    rows[1]["answer"] = "5"
    write_lines(pack / "test.jsonl", [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 1
    assert (f"{pack / 'test.jsonl'}:2: same prompt as {pack / 'train.jsonl'}:5 in split "
            "'train': splits must be disjoint") in out


def test_same_prompt_within_a_split_is_a_warning(capsys, pack):
    rows = records(pack / "train.jsonl")
    rows.append({**rows[0], "id": "bakery-copy"})
    write_lines(pack / "train.jsonl", [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 0
    assert f"warning: {pack / 'train.jsonl'}:9: same prompt as {pack / 'train.jsonl'}:1" in out


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.replace('env = "grpo/MathExact-v0"', 'env = "grpo/Nope-v0"'),
     "env 'grpo/Nope-v0' is not registered"),
    (lambda m: m.replace('version = "0.1.0"\n', ""), "missing key 'version'"),
    (lambda m: m.replace('license = "CC0-1.0"', "license = 1"), "'license' must be a str"),
    (lambda m: m.replace("[reward_weights]", "[reward_weight]"), "unknown key 'reward_weight'"),
    (lambda m: m.replace("format = 0.2", "style = 0.2"), "unknown reward component"),
    (lambda m: m.replace('test = "test.jsonl"', 'test = "gone.jsonl"'),
     "split 'test': file 'gone.jsonl' is missing"),
    (lambda m: m.replace("name =", "name = = "), "invalid TOML"),
])
@pytest.mark.parametrize("flags", [[], ["--no-gold"]])
def test_manifest_problems_name_the_manifest(capsys, pack, edit, message, flags):
    manifest = pack / "pack.toml"
    manifest.write_text(edit(manifest.read_text()))
    code, out = run(capsys, "validate", *flags, str(pack))
    assert code == 1
    assert f"error: {manifest}: " in out and message in out


def test_not_a_pack_folder_fails_even_next_to_a_good_one(capsys, tmp_path):
    code, out = run(capsys, "validate", str(EXAMPLE_PACK), str(tmp_path))
    assert code == 1
    assert f"error: {tmp_path / 'pack.toml'}: no pack.toml: not a pack folder" in out
    assert "OK: pack 'example'" in out and f"REFUSED: {tmp_path}" in out


def test_cli_exit_code_in_a_subprocess(pack):
    rows = records(pack / "train.jsonl")
    del rows[3]["answer"]
    write_lines(pack / "train.jsonl", [json.dumps(r) for r in rows])
    done = subprocess.run([sys.executable, "-m", "envs", "validate", str(pack)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1
    assert f"{pack / 'train.jsonl'}:4: missing field(s): 'answer'" in done.stdout
    clean = subprocess.run([sys.executable, "-m", "envs", "validate", str(EXAMPLE_PACK)],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert clean.returncode == 0, clean.stdout


def test_a_large_pack_is_checked_in_full(capsys, tmp_path):
    shutil.copy(EXAMPLE_PACK / "pack.toml", tmp_path / "pack.toml")
    n = 3000
    rows = [{"id": i, "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]
    rows[2500]["answer"] = "?"
    write_lines(tmp_path / "train.jsonl", [json.dumps(r) for r in rows[:2600]])
    write_lines(tmp_path / "test.jsonl", [json.dumps(r) for r in rows[2600:]])
    code, out = run(capsys, "validate", str(tmp_path))
    assert code == 1
    assert "3000 tasks checked (train 2600, test 400); 2999 golds well-formed" in out
    assert f"{tmp_path / 'train.jsonl'}:2501: gold refused: '?' is not a number" in out


# -- validate: the other built-in envs and loader / generator packs -------------------------------
JSON_MANIFEST = """
name = "json-tiny"
version = "1.0.0"
description = "d"
license = "MIT"
source = "hand-written"
env = "grpo/JsonSchema-v0"
prompt_template = "Return {what} as JSON."
[splits]
train = "train.jsonl"
"""
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}},
          "required": ["n"], "additionalProperties": False}


def json_pack(folder, rows):
    folder.mkdir(exist_ok=True)
    (folder / "pack.toml").write_text(JSON_MANIFEST)
    write_lines(folder / "train.jsonl", [json.dumps(r) for r in rows])
    return folder


def test_json_pack_golds_must_fit_their_schema(tmp_path):
    rows = [
        {"id": "ok", "what": "a", "schema": SCHEMA, "expected": {"n": 1}},
        {"id": "any", "what": "b", "schema": SCHEMA,
         "expected": {"n": 2, "tag": {"$anyOf": [{"$absent": True}, "x"]}}},
        {"id": "no-gold", "what": "c", "schema": SCHEMA},
        {"id": "bad-type", "what": "d", "schema": SCHEMA, "expected": {"n": "three"}},
        {"id": "bad-schema", "what": "e", "schema": {"type": 12}, "expected": {"n": 1}},
        {"id": "no-schema", "what": "f", "expected": {"n": 1}},
    ]
    report = validate_folder(json_pack(tmp_path / "p", rows))
    errors = [str(e) for e in report.errors]
    train = tmp_path / "p" / "train.jsonl"
    assert report.golds_passed == 2 and report.golds_unchecked == 1
    assert len(errors) == 4
    assert errors[0] == f"{train}:6: missing field(s): 'schema' (needed by grpo/JsonSchema-v0)"
    assert errors[1].startswith(f"{train}:4: gold answer fails its own verifier: schema_invalid")
    assert errors[2].startswith(f"{train}:5: verifier raised SchemaTaskError")
    # Without `expected`, a value built from the schema alone is paid in full: refused too,
    # although other tasks failed (every check runs).
    assert errors[3].startswith(f"{train}:3: a trivial program earns full marks")


def test_math_golds_must_be_well_formed_answers_of_the_pack_type(capsys, pack):
    """A gold checked against itself always "passes"; validate refuses golds by their form."""
    manifest = (pack / "pack.toml").read_text()
    assert 'answer = "number"' in manifest
    test = pack / "test.jsonl"
    rows = records(test)
    rows[0]["answer"] = "twenty-nine rolls"  # not a number literal
    rows[1]["answer"] = "\\frac{1}{"  # does not parse
    rows[2]["answer"] = "999999"  # wrong, but well-formed: only the author can know
    write_lines(test, [json.dumps(r) for r in rows])
    code, out = run(capsys, "validate", str(pack))
    assert code == 1, out
    assert f"{test}:1: gold refused: 'twenty-nine rolls' is not a number literal" in out
    assert f"{test}:2: gold refused: " in out and "not a number literal" in out
    assert "10 golds well-formed and accepted by their own verifier (form is checked, not " \
           "correctness); 2 error(s)" in out
    # As an expression pack, the fraction is still refused: it does not parse.
    (pack / "pack.toml").write_text(manifest.replace('answer = "number"', 'answer = "expression"'))
    code, out = run(capsys, "validate", str(pack))
    assert code == 1 and "does not parse as a math answer" in out, out
    assert "'twenty-nine rolls' is not a number literal" not in out


def test_unknown_answer_type_is_refused(pack):
    manifest = (pack / "pack.toml").read_text()
    (pack / "pack.toml").write_text(manifest.replace('answer = "number"', 'answer = "numbr"'))
    report = validate_folder(pack)
    assert any("answer = 'numbr' is not an answer type of grpo/MathExact-v0" in str(e)
               for e in report.errors), report.errors


def test_procedural_pack_reports_what_it_sampled(capsys):
    code, out = run(capsys, "validate", "--sample", "50", str(ROOT / "tasks" / "arith"))
    assert code == 0, out
    assert "note: split 'train' is unbounded: checked its first 50 tasks" in out
    assert "OK: pack 'arith'" in out and "train 50, test 1029" in out


def test_loader_pack_is_checked_in_full(capsys):
    code, out = run(capsys, "validate", str(ROOT / "tasks" / "gsm8k"))
    assert code == 0, out
    assert "1319 tasks checked (train 1039, test 280); 1319 golds well-formed" in out


# -- validate: what any env gets from the two hooks ----------------------------------------------
class BatchEnv(TaskEnv):
    """A stand-in for a sandboxed env: grades through ``grade_many``; golds from ``solution``."""

    env_id = "test/Batch-v0"
    default_weights = {"ok": 1.0}
    required_fields = ("solution",)
    batches: list = []

    def grade(self, task, completion):
        if completion == "SANDBOX DOWN":
            return {"ok": 0.0}, Verdict.fail("sandbox_error", sandbox_error=True, error="no docker")
        passed = completion == "right"
        return {"ok": float(passed)}, (Verdict.ok() if passed else Verdict.fail("wrong"))

    def grade_many(self, tasks, completions):
        BatchEnv.batches.append(len(tasks))
        return [self.score(t, c) for t, c in zip(tasks, completions, strict=True)]

    def gold_completion(self, task):
        return task["solution"]


@pytest.fixture
def batch_env():
    gym.register("test/Batch-v0", entry_point=BatchEnv, disable_env_checker=True)
    BatchEnv.batches = []
    yield
    del gym.registry["test/Batch-v0"]


def batch_pack(folder, solutions):
    folder.mkdir()
    (folder / "pack.toml").write_text(JSON_MANIFEST.replace("grpo/JsonSchema-v0", "test/Batch-v0"))
    write_lines(folder / "train.jsonl", [json.dumps({"id": i, "what": str(i), "solution": s})
                                         for i, s in enumerate(solutions)])
    return folder


def test_envs_with_grade_many_are_graded_in_batches(batch_env, tmp_path):
    report = validate_folder(batch_pack(tmp_path / "p", ["right"] * 100 + ["wrong"]))
    assert BatchEnv.batches == [64, 37]
    assert report.golds_passed == 100
    assert [str(e) for e in report.errors] == [
        f"{tmp_path / 'p' / 'train.jsonl'}:101: gold answer fails its own verifier: wrong "
        "(gold completion 'wrong', extracted 'None')"
    ]


def test_an_unavailable_sandbox_is_one_error_not_thousands(batch_env, tmp_path):
    report = validate_folder(batch_pack(tmp_path / "p", ["right", "SANDBOX DOWN"] * 100))
    assert len(report.errors) == 1
    assert "the sandbox is unavailable (no docker)" in str(report.errors[0])
    assert str(report.errors[0]).startswith(f"{tmp_path / 'p' / 'train.jsonl'}:2: ")


def test_no_gold_flag_skips_grading(capsys, batch_env, tmp_path):
    folder = batch_pack(tmp_path / "p", ["wrong"])
    code, out = run(capsys, "validate", "--no-gold", str(folder))
    assert code == 0 and "note: gold answers not checked (--no-gold)" in out
    assert BatchEnv.batches == []


# -- list and show ---------------------------------------------------------------------------------
def test_list_prints_envs_and_packs(capsys):
    code, out = run(capsys, "list")
    assert code == 0
    lines = [line for line in out.splitlines() if line.strip()]
    for env_id in ("grpo/MathExact-v0", "grpo/CodeTests-v0", "grpo/JsonSchema-v0"):
        assert any(line.split()[:2] == [env_id, "built-in"] for line in lines)
    for name in pack_sources():
        assert any(line.split()[0] == name for line in lines if line.startswith("  "))
    gsm8k = next(line for line in lines if line.split()[0] == "gsm8k")
    assert "grpo/MathExact-v0" in gsm8k and "train 1039, test 280" in gsm8k
    assert gsm8k.rstrip().endswith("built-in") and " 1.0.0+" in gsm8k
    arith = next(line for line in lines if line.split()[0] == "arith")
    assert "train unbounded, test 1029" in arith


def test_show_prints_prompts_and_golds(capsys):
    code, out = run(capsys, "show", "grpo/MathExact-v0", "--pack", "gsm8k", "--n", "3")
    assert code == 0
    assert out.startswith("grpo/MathExact-v0, pack gsm8k 1.0.0+")
    assert out.count("\n--- gsm8k/") == 3
    assert out.count("gold: \\boxed{") == 3
    assert "Solve the problem step by step" in out


def test_show_takes_pack_options_and_reports_bad_ones(capsys):
    code, out = run(capsys, "show", "grpo/MathExact-v0", "--pack", "arith", "--option",
                    "level=1", "--n", "2", "--split", "test")
    assert code == 0 and out.count("--- arith/") == 2
    code, out = run(capsys, "show", "grpo/MathExact-v0", "--pack", "arith", "--option", "level=9")
    assert code == 1 and out.startswith("error:") and "level" in out
