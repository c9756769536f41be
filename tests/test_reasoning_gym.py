"""grpo/ReasoningGym-v0: make-time checks, packs, grading under our rules, the catalogue."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs

pytest.importorskip("reasoning_gym")

from envs.domains.reasoning_gym import catalogue, grading  # noqa: E402
from envs.domains.reasoning_gym.generator import rg_version  # noqa: E402

ENV = "grpo/ReasoningGym-v0"
ROOT = Path(__file__).resolve().parents[1]


def make(**kwargs):
    return gym.make(ENV, **kwargs).unwrapped


@functools.cache
def env_of(task: str):
    """One env per task (train split: its test set is never built), shared by the tests."""
    return make(task=task)


@pytest.fixture(scope="module")
def chain_sum():
    return make(task="chain_sum", level=1, split="test")


# -- make time ----------------------------------------------------------------------------------
def test_config_keys_go_to_the_generator():
    env = make(task="chain_sum", min_terms=3, max_terms=3, min_digits=1, max_digits=1)
    question = env.pack.task_at("train", 0)["question"]
    assert question.count("+") + question.count("-") == 2  # three terms, two operators


@pytest.mark.parametrize("kwargs, words", [
    ({"task": "chain_sum", "min_term": 2}, ["'min_term'", "min_terms", "max_digits"]),
    ({"task": "chain_sum", "min_terms": 0}, ["min_terms must be positive", "max_terms"]),
    ({"task": "chain_sum", "seed": 3}, ["'seed'", "the pack's own"]),
    ({"task": "chain_sum", "level": 99}, ["level one of 1..11"]),
    ({"task": "chain_sm"}, ["unknown task", "'chain_sum'"]),
    ({"task": "composite"}, ["combines other tasks"]),
])
def test_bad_keywords_are_one_line_errors(kwargs, words):
    with pytest.raises((TypeError, ValueError)) as info:
        make(**kwargs)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_missing_extra_is_named_and_envs_works_without_it():
    # One process without reasoning-gym: `import envs` and `envs list`'s reasoning-gym section
    # (read from cards.json; the rest of `list` loads every pack, a minute on a busy CI box)
    # work, then gym.make names the extra.
    code = ("import sys; sys.modules['reasoning_gym'] = None\n"
            "import envs\n"
            "from envs.tools.cli_list import print_reasoning_gym\n"
            "print(sorted(envs.env_sources()))\n"
            "print_reasoning_gym(show_all=False)\n"
            "import gymnasium as gym\n"
            "try:\n    gym.make('grpo/ReasoningGym-v0', task='chain_sum')\n"
            "except ImportError as exc:\n    print('ERROR', exc)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "grpo/ReasoningGym-v0" in run.stdout and "chain_sum" in run.stdout
    error = run.stdout.strip().splitlines()[-1]
    assert error.startswith("ERROR") and 'pip install -e ".[reasoning-gym]"' in error


# -- packs ----------------------------------------------------------------------------------------
def test_train_and_test_are_disjoint_and_fixed(chain_sum):
    test = {chain_sum.pack.task_at("test", i)["question"]
            for i in range(chain_sum.pack.size("test"))}
    train = [chain_sum.pack.task_at("train", i)["question"] for i in range(300)]
    assert test and not test & set(train)
    again = make(task="chain_sum", level=1, split="test")
    assert [again.pack.task_at("test", i)["question"] for i in range(5)] == \
        [chain_sum.pack.task_at("test", i)["question"] for i in range(5)]


def test_pack_version_names_reasoning_gym_and_the_config(chain_sum):
    version = chain_sum.pack.pack_version
    assert f"rg{rg_version()}" in version
    other = make(task="chain_sum", level=2, split="test").pack.pack_version
    assert other != version


def test_levels_come_from_the_curriculum():
    assert make(task="chain_sum", level=1).config["max_terms"] == 2
    assert make(task="chain_sum", level=3).config["max_terms"] == 4


# -- grading ----------------------------------------------------------------------------------------
def _episode(env, completion):
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(completion)
    assert terminated
    return reward, info


@pytest.mark.parametrize("task, kind", [
    ("chain_sum", "number"), ("caesar_cipher", "exact"), ("countdown", "scorer"),
    ("word_sorting", "scorer"),
])
def test_end_to_end_golds_credited_padding_refused(task, kind):
    env = env_of(task)
    assert env.kind == kind
    obs, info = env.reset(seed=0)
    gold = env.pack.get(info["task_id"])["answer"]
    assert ("\\boxed{}" if kind == "number" else "<answer>") in obs
    _, reward, *_ = env.step(env.gold_completion(env.pack.get(info["task_id"])))
    assert reward == 1.0
    task_ = env.pack.get(info["task_id"])
    for completion in catalogue.padded(env, gold, ["12", "13"]).values():
        assert env.score(task_, completion)[0] == 0.0, completion


def test_chain_sum_padded_answer_refused_where_reasoning_gym_pays(chain_sum):
    task = next(chain_sum.pack.task_at("test", i) for i in range(50)
                if chain_sum.pack.task_at("test", i)["answer"] == "-4")
    entry = task["rg_entry"]
    assert chain_sum.pack.generator.dataset.score_answer("-4 12 13", entry) == 0.25
    reward, info = chain_sum.score(task, "\\boxed{-4 12 13}")
    assert reward == 0.0 and info["reason"] == "not_a_number"
    assert chain_sum.score(task, "The sum is \\boxed{-4}.")[0] == 1.0
    assert chain_sum.score(task, "The sum is -4.")[0] == 0.0  # not in the asked format


def test_a_number_task_pays_the_number_alone(chain_sum):
    """The card's reward search found these paid on aiw, basic_arithmetic and binary_alternation
    (math's reading of 5% as 5 is for questions about percent; reasoning-gym's own check refuses
    them all). A brace-less box before a stray brace (gcd: ``\\boxed2}``) is malformed."""
    task = next(chain_sum.pack.task_at("test", i) for i in range(50)
                if len(chain_sum.pack.task_at("test", i)["answer"]) == 1)
    gold = task["answer"]
    for hack in (rf"\boxed{{{gold}\%}}", rf"\boxed{{{gold}%}}", rf"\boxed{{x = {gold}}}",
                 rf"\boxed{{, {gold}}}", rf"\boxed{{+{gold}\%}}", rf"\boxed{{{gold}\,, }}]",
                 rf"\boxed{{\text{{{gold}}} \text{{ lakh}}}}", rf"\boxed{{{gold} \text{{ lakh}}}}",
                 rf"\boxed{{{gold} \text{{ sisters}}}}"):
        reward, info = chain_sum.score(task, hack)
        assert reward == 0.0 and info["reason"] in ("not_a_number", "not_equal"), (hack, info)
    for hack in (rf"\boxed{gold}}}", rf"\boxed{gold} \div 1}}"):
        assert chain_sum.score(task, hack)[1]["reason"] == "malformed_box", hack
    for honest in (rf"\boxed{{{gold}}}", rf"\boxed{{\text{{{gold}}}}}", rf"\boxed{{{gold}\,}}",
                   rf"The sum is \boxed{{ {gold} }}.", rf"\boxed{{{gold}.0}}"):
        assert chain_sum.score(task, honest)[1]["passed"], honest


def test_a_number_task_pays_no_other_answer_in_an_answer_tag(chain_sum):
    """The env's other answer format is a second answer when it holds anything but the box:
    the card's reward search found ``\\boxed{2.0}ied{<answer>2.0} 1</answer>\\,}`` paid on
    rectangle_count; the hedges below were paid too."""
    task = next(chain_sum.pack.task_at("test", i) for i in range(50)
                if chain_sum.pack.task_at("test", i)["answer"] not in ("0", "1"))
    gold = task["answer"]
    other = str(int(gold) + 1)
    for hack in (rf"\boxed{{{gold}.0}}ied{{<answer>{gold}.0}} 1</answer>\,}}",
                 rf"\boxed{{{gold}}} <answer>{other}</answer>",
                 rf"<answer>{other}</answer> \boxed{{{gold}}}",
                 rf"<answer>1</answer><answer>\boxed{{{gold}}}</answer>",
                 rf"\boxed{{{gold}}} <answer></answer>"):
        reward, info = chain_sum.score(task, hack)
        assert reward == 0.0 and info["reason"] == "several_answers", (hack, info)
    for honest in (rf"<answer>\boxed{{{gold}}}</answer>", rf"\boxed{{{gold}}} <answer>{gold}</answer>",
                   rf"\boxed{{{gold}}} <answer> {gold} </answer>"):
        assert chain_sum.score(task, honest)[1]["passed"], honest


def test_one_answer_block_only():
    assert grading.answer_block("<answer>a</answer>") == ("a", "ok")
    assert grading.answer_block("<answer>a</answer> <answer>a</answer>")[1] == "several_answers"
    assert grading.answer_block("<answer>a")[1] == "no_answer"
    assert grading.grade_exact("a b\nc", "<answer> a  b \n c </answer>").passed
    assert not grading.grade_exact("ab", "<answer>ab c</answer>").passed


@pytest.mark.parametrize("scorer, reason", [
    ("hang", "timeout"), ("crash", "scorer_error"), ("not_a_score", "scorer_error"),
])
def test_a_misbehaving_scorer_is_a_verdict(scorer, reason):
    entry = {"question": "q", "answer": "x", "metadata": {}}
    verdict = grading.grade_scorer(("call", f"tests.reasoning_gym_helpers:{scorer}"), entry,
                                   "<answer>x</answer>", timeout=1.0)
    assert not verdict.passed and verdict.reason == reason
    # The worker serves again after a hang or a crash.
    ok = grading.grade_scorer(("call", "tests.reasoning_gym_helpers:pays_anything"), entry,
                              "<answer>x</answer>", timeout=30.0)
    assert ok.passed


def test_a_scorer_sees_a_bounded_answer_only():
    entry = {"question": "q", "answer": "xy", "metadata": {}}
    spec = ("call", "tests.reasoning_gym_helpers:pays_anything")
    long = "<answer>" + "x" * (grading.LENGTH_FLOOR + 1) + "</answer>"
    assert grading.grade_scorer(spec, entry, long, timeout=30.0).reason == "too_long"
    assert grading.grade_scorer(spec, entry, "xy", timeout=30.0).reason == "no_answer"


def test_partial_scores_pay_nothing():
    env = env_of("countdown")
    task = env.pack.task_at("train", 0)
    reward, info = env.score(task, "<answer>1 + 1</answer>")  # reasoning-gym pays 0.01
    assert reward == 0.0 and info["reason"] == "scorer_partial"


# -- catalogue and CLI ----------------------------------------------------------------------------
def test_list_hides_failing_tasks_unless_asked(tmp_path):
    cards = tmp_path / "cards.json"
    cards.write_text(json.dumps({"reasoning_gym": "0", "tasks": {
        "good": {"ok": True, "kind": "number", "reason": ""},
        "bad": {"ok": False, "kind": "exact", "reason": "statistical.adversarial_floor"}}}))
    rows, hidden = catalogue.list_rows(path=cards)
    assert [r[0] for r in rows] == ["good"] and hidden == 1
    rows, hidden = catalogue.list_rows(show_all=True, path=cards)
    assert ["bad", "exact", "fail: statistical.adversarial_floor"] in rows and hidden == 0


def test_committed_cards_cover_every_task():
    from envs.domains.reasoning_gym.generator import task_names

    assert catalogue.rg_version_carded() == rg_version()
    assert set(catalogue.verdicts()) == set(task_names())
    assert catalogue.verdicts()["chain_sum"].ok


def test_show_prints_prompts_and_golds(capsys):
    from envs.tools.cli_show import print_samples

    assert print_samples(ENV, pack=None, split="test", n=2,
                         options=["task=leg_counting", "level=1"]) == 0
    out = capsys.readouterr().out
    assert "how many legs" in out and "gold: \\boxed{" in out


def test_one_task_card_runs():
    from envs.tools.card.reasoning_gym import run_task_card

    row = run_task_card("chain_sum", n_tasks=4)
    assert row["ok"], row["reason"]
    assert row["padded"] == 16 and row["padded_paid"] == 0


def test_building_a_scorer_is_not_the_scorers_time():
    # A dataset that takes longer to build than the time limit must not make the first
    # answer a timeout (arc_agi's first gold was one, under load, before the prepare step).
    entry = {"question": "q", "answer": "x", "metadata": {}}
    verdict = grading.grade_scorer(("call", "tests.reasoning_gym_slow_scorer:pays"), entry,
                                   "<answer>x</answer>", timeout=1.0)
    assert verdict.passed, verdict


def test_a_task_whose_generator_acts_outside_the_process_is_not_offered(tmp_path, monkeypatch):
    # codeio's generator exec()s its dataset's programs here; they wrote files into the cwd.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as err:
        gym.make("grpo/ReasoningGym-v0", task="codeio")
    assert "\n" not in str(err.value) and "not offered" in str(err.value)
    from envs.domains.reasoning_gym.catalogue import verdicts

    assert not verdicts()["codeio"].ok and "not offered" in verdicts()["codeio"].reason
    assert list(tmp_path.iterdir()) == []


def test_python_m_envs_card_cards_one_task_named_by_its_kwargs():
    # No pack feeds the env: the card runs on the pack its task= builds (it said "no pack feeds").
    from envs.tools.card import run_card
    from envs.tools.cli_card import make_env, targets

    [(env_id, pack)] = targets("grpo/ReasoningGym-v0", None)
    env = make_env(env_id, pack, {"task": "chain_sum"})
    try:
        card = run_card(env, n_tasks=4, seed=0, corpus_lines=[])
        assert env.pack.name == "rg-chain_sum" and card.results
        assert all(r.status != "fail" for r in card.results), card.summary()
    finally:
        env.close()
