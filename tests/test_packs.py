"""The pack format, the built-in math packs and their splits."""

import json

import pytest

from tasks import PackError, load_folder, load_pack, pack_names
from tasks.boxes import find_boxes, last_box
from tasks.pack import read_jsonl
from tasks.sources import in_test_split

MANIFEST = """
name = "tiny"
version = "0.1.0"
description = "d"
license = "MIT"
source = "hand-written"
env = "grpo/MathExact-v0"
prompt_template = "Q: {question}"
[splits]
train = "train.jsonl"
test = "test.jsonl"
"""


def write_pack(tmp_path, train, test, manifest=MANIFEST):
    (tmp_path / "pack.toml").write_text(manifest)
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in train) + "\n")
    (tmp_path / "test.jsonl").write_text("\n".join(json.dumps(r) for r in test) + "\n")
    return tmp_path


def test_data_pack_loads_and_prompts(tmp_path):
    pack = load_folder(write_pack(tmp_path, [{"id": 1, "question": "1+1", "answer": "2"}],
                                  [{"id": "t", "question": "2+2", "answer": "4"}]))
    assert pack.size("train") == 1 and pack.size("test") == 1
    task = pack.get("tiny/t")
    assert task.split == "test" and task["answer"] == "4"
    assert pack.prompt(task) == "Q: 2+2"
    assert pack.get("1").id == "tiny/1"  # ids are strings, bare native ids work too
    assert pack.pack_version.startswith("0.1.0+")


def test_pack_version_changes_with_content(tmp_path):
    a = load_folder(write_pack(tmp_path, [{"id": 1, "question": "q", "answer": "2"}], []))
    b = load_folder(write_pack(tmp_path, [{"id": 1, "question": "q", "answer": "3"}], []))
    assert a.pack_version != b.pack_version


def test_bad_jsonl_line_is_named(tmp_path):
    write_pack(tmp_path, [{"id": 1, "question": "q", "answer": "2"}], [])
    with open(tmp_path / "train.jsonl", "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(PackError, match=r"train\.jsonl:2: invalid JSON"):
        load_folder(tmp_path)


def test_duplicate_ids_across_splits_are_refused(tmp_path):
    write_pack(tmp_path, [{"id": 1, "question": "q", "answer": "2"}],
               [{"id": 1, "question": "q", "answer": "2"}])
    with pytest.raises(PackError, match="duplicate id '1'"):
        load_folder(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.replace('version = "0.1.0"\n', ""), "missing key 'version'"),
        (lambda m: m.replace('license = "MIT"', "license = 3"), "'license' must be a str"),
        (lambda m: m + "\nreward_weights = 5\n", "reward_weights"),
        (lambda m: m.replace("name =", "name = = "), "invalid TOML"),
    ],
)
def test_malformed_manifest_is_refused(tmp_path, edit, message):
    write_pack(tmp_path, [], [], manifest=edit(MANIFEST))
    with pytest.raises(PackError, match=message):
        load_folder(tmp_path)


def test_unknown_pack_and_split_are_clear():
    with pytest.raises(PackError, match="unknown pack 'nope'.*gsm8k"):
        load_pack("nope")
    with pytest.raises(PackError, match="no split 'validation'"):
        load_pack("gsm8k").size("validation")


def test_read_jsonl_rejects_non_objects(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(PackError, match=r"x\.jsonl:2: a record must be a JSON object"):
        read_jsonl(path)


def test_gsm8k_pack():
    pack = load_pack("gsm8k")
    assert pack.size("train") + pack.size("test") == 1319
    ids = set(pack.ids("train")) | set(pack.ids("test"))
    assert ids == {f"gsm8k/{i}" for i in range(1319)}
    assert not set(pack.ids("train")) & set(pack.ids("test"))
    first = pack.get("gsm8k/0")
    assert first["answer"] == "18" and "Janet" in first["question"]
    # the split is a stable hash of the id, not of the file order
    assert all(in_test_split(t) for t in pack.ids("test"))


def test_math_packs_take_gold_from_boxed_solution():
    math = load_pack("math")
    assert math.size("train") == 4500 and math.size("test") == 500
    task = math.get("math/algebra/0")
    assert task["answer"] == last_box(task["solution"]) == "2"
    m500 = load_pack("math500")
    assert m500.size("train") + m500.size("test") == 500
    assert {t["problem"] for t in m500.records("train") + m500.records("test")} == {
        t["problem"] for t in math.records("test")
    }
    assert "math500" in pack_names("grpo/MathExact-v0")


def test_last_box_handles_braces():
    assert last_box(r"so \boxed{\frac{1}{2}} and \boxed{x^{2}}") == "x^{2}"
    assert last_box(r"\boxed{unbalanced") is None
    assert last_box("nothing") is None
    assert last_box(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"  # escaped braces are content


def test_one_box_finder_marks_nested_and_unclosed_boxes():
    [box] = find_boxes(r"so \boxed{2 + \boxed{6}}")
    assert box.nested and not box.well_formed and box.content == r"2 + \boxed{6}"
    assert find_boxes(r"\boxed{18") == []  # unclosed: not a box
    [lenient] = find_boxes(r"\boxed{18", lenient=True)  # a trusted gold runs to the end
    assert lenient.content == "18" and not lenient.closed
    assert [b.content for b in find_boxes(r"\boxed 5 and \fbox{6}")] == ["5", "6"]


def test_arith_is_deterministic_with_disjoint_splits():
    pack = load_pack("arith", level=1)
    again = load_pack("arith", level=1)
    assert [pack.task_at("train", i).fields for i in range(20)] == [
        again.task_at("train", i).fields for i in range(20)
    ]
    assert pack.size("train") is None
    train = {pack.task_at("train", i)["expression"] for i in range(3000)}
    test = {r["expression"] for r in pack.records("test")}
    assert test and not train & test
    assert len(train | test) == 100  # every single-digit sum appears somewhere
    task = pack.get("arith/L1-17")
    assert int(task["answer"]) == eval(task["expression"])
    with pytest.raises(PackError):
        pack.get("arith/L3-17")  # a level-3 id does not belong to the level-1 pack


def test_arith_levels_and_bad_options():
    mixed = load_pack("arith")
    levels = {mixed.task_at("train", i)["level"] for i in range(12)}
    assert levels == set(range(1, 7))
    for i in range(60):
        t = mixed.task_at("train", i)
        assert int(t["answer"]) == eval(t["expression"])
    with pytest.raises(PackError, match="level"):
        load_pack("arith", level=9)
    with pytest.raises(PackError, match="takes no options"):
        load_pack("gsm8k", level=1)
