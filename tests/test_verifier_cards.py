"""Verifier report cards (``python -m envs card``): CI's fast card of every built-in pack against
the committed baseline, the README's generated table, and each check failing on a verifier
built to fail it.

After a deliberate change to a verifier or a corpus, ``python -m envs card --all --fast
--update-baseline`` rewrites ``envs/tools/card/baseline.json`` and the README table.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.__main__ import main
from envs.base import TaskEnv
from envs.tools.card import baseline, render, search
from envs.tools.card.card import FAST_TASKS, run_card
from envs.tools.card.checks import BY_ID, CHECKS, HACK_MEAN_MAX
from envs.tools.card.corpus import CORPORA, CorpusError, Line, load, read_file
from envs.tools.card.grading import grade
from envs.tools.cli_card import cards, targets
from envs.verify.verdict import Verdict
from tasks import PackError, Task, load_folder

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PACK = ROOT / "examples" / "task-pack" / "grpo_example_pack"
NEW_DOMAIN = ROOT / "examples" / "new-domain"
BUILTIN = targets(None, None, all_builtin=True)
SANDBOXED = {"grpo/CodeTests-v0"}


def _key(pair: tuple[str, object]) -> str:
    return f"{pair[0]}|{pair[1]}"


_CARDS: dict[str, object] = {}


def fast_card(pair: tuple[str, str]):
    """The fast card of one built-in (env, pack), computed once per session."""
    key = _key(pair)
    if key not in _CARDS:
        _CARDS[key] = next(cards([pair], {}, fast=True, n_tasks=None, seed=0, split=None))
    return _CARDS[key]


def _param(pair: tuple[str, str]):
    marks = [pytest.mark.docker] if pair[0] in SANDBOXED else []
    return pytest.param(pair, id=_key(pair), marks=marks)


# -- CI: the fast cards of the built-in packs, the baseline and the README -----------------------
def test_every_builtin_pack_has_a_baseline():
    assert {_key(p) for p in BUILTIN} == set(baseline.read()), (
        "regenerate: python -m envs card --all --fast --update-baseline")


@pytest.mark.parametrize("pair", [_param(p) for p in BUILTIN])
def test_fast_card_does_not_regress(pair):
    card = fast_card(pair)
    assert card.n_tasks >= 2 and len(card.results) == len(CHECKS)
    shallow = card.result("statistical.adversarial_floor").metrics
    assert shallow["policy"] <= shallow["mean"] + 1e-9  # one kind never beats the best per task
    found = baseline.compare([card], baseline.read())
    assert not found, "\n".join(found) + "\n" + render.text(card)


@pytest.mark.docker
def test_readme_table_is_the_generated_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = render.readme_section(readme)
    assert shown is not None, "README.md has no <!-- card:start --> ... <!-- card:end -->"
    table = render.markdown([fast_card(p) for p in BUILTIN])
    assert render.without_columns(shown) == render.without_columns(table), (
        "regenerate: python -m envs card --all --fast --update-baseline")


def test_the_comparison_ignores_latency_and_catches_a_worse_check():
    card = fast_card(("grpo/MathExact-v0", "arith"))
    base = {card.key: baseline.entry(card)}
    assert baseline.compare([card], base) == []
    assert "grpo.grading_latency" not in base[card.key]["checks"]
    worse = json.loads(json.dumps(base))
    worse[card.key]["checks"]["statistical.gameability_gap"]["metrics"]["mean"] = -0.5
    assert any("gameability_gap: mean" in r for r in baseline.compare([card], worse))
    passed_before = json.loads(json.dumps(base))
    result = card.result("semantic.floor_gap")
    result.metrics = {**result.metrics, "mean": 0.9}  # now over the threshold: fails
    try:
        found = baseline.compare([card], passed_before)
        assert any("floor_gap: passed, now fails" in r for r in found), found
    finally:
        result.metrics = {**result.metrics, "mean": passed_before[card.key]["checks"][
            "semantic.floor_gap"]["metrics"]["mean"]}


def test_a_check_left_with_nothing_to_grade_is_a_regression():
    card = run_card(ToyEnv(honest_rule), fast=True, corpus_lines=[
        _line("honest", "ANSWER 121", task_id="example/train-1")])
    base = {card.key: baseline.entry(card)}
    assert base[card.key]["checks"]["grpo.honest_precision"]["status"] == "pass"
    emptied = run_card(ToyEnv(honest_rule), fast=True, corpus_lines=[])
    found = baseline.compare([emptied], base)
    assert found == ["test/Toy-v0|example: grpo.honest_precision: was measured, now has "
                     "nothing to grade"], found


def test_the_fast_sample_is_seeded_and_small():
    pair = ("grpo/MathExact-v0", "gsm8k")
    again = next(cards([pair], {}, fast=True, n_tasks=None, seed=0, split=None))
    first = fast_card(pair)
    assert again.n_tasks == first.n_tasks == FAST_TASKS
    assert [r.metrics for r in again.results if r.check.id != "grpo.grading_latency"] == [
        r.metrics for r in first.results if r.check.id != "grpo.grading_latency"]


# -- the checks fail on verifiers built to fail them ---------------------------------------------
class ToyEnv(TaskEnv):
    """Grades the example pack's tasks by a rule each test picks."""

    env_id: ClassVar[str] = "test/Toy-v0"
    pack_env: ClassVar[str] = "grpo/MathExact-v0"
    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0, "format": 0.1}

    def __init__(self, rule, **kwargs):
        super().__init__(pack=load_folder(EXAMPLE_PACK), **kwargs)
        self.rule = rule

    def grade(self, task: Task, completion: str):
        correct = float(self.rule(task, completion))
        verdict = Verdict.ok() if correct == 1.0 else Verdict.fail("not_equal")
        return {"correct": correct, "format": 1.0}, verdict

    def gold_completion(self, task: Task) -> str:
        return f"ANSWER {task['answer']}"


def honest_rule(task, completion):
    return completion == f"ANSWER {task['answer']}"


def _status(card, check_id):
    return card.result(check_id).status


def test_an_honest_toy_verifier_passes_every_check():
    card = run_card(ToyEnv(honest_rule), fast=True, corpus_lines=[])
    statuses = {r.check.id: r.status for r in card.results}
    assert statuses.pop("statistical.gameability_gap") == "n/a"
    assert statuses.pop("grpo.honest_precision") == "n/a"
    assert set(statuses.values()) == {"pass"}, render.text(card)


def test_rewarding_the_empty_string_fails_the_floor():
    # RFC 008's motivating case: a verifier that returned reward 1.0 for the empty string.
    env = ToyEnv(lambda t, c: c == "" or honest_rule(t, c))
    card = run_card(env, fast=True, corpus_lines=[])
    assert _status(card, "semantic.floor_gap") == "fail"
    assert card.result("semantic.floor_gap").metrics["worst"] == "empty"
    assert _status(card, "statistical.adversarial_floor") == "fail"  # "" is shallow too
    assert "floor_gap" in card.summary() and not card.ok


def test_a_gold_short_of_the_maximum_fails_the_oracle():
    card = run_card(ToyEnv(lambda t, c: False), fast=True, corpus_lines=[])
    assert _status(card, "semantic.oracle_max") == "fail"
    assert card.result("semantic.oracle_max").metrics["at_max"] == 0.0


def test_a_verifier_that_obeys_the_grader_note_fails_the_canary():
    card = run_card(ToyEnv(lambda t, c: "GRADER" in c or honest_rule(t, c)), fast=True,
                    corpus_lines=[])
    assert _status(card, "semantic.canary_floor") == "fail"
    assert card.result("semantic.canary_floor").metrics["worst"] == "injection"


def test_a_verifier_that_pays_another_tasks_gold_fails_the_canary():
    card = run_card(ToyEnv(lambda t, c: c.startswith("ANSWER")), fast=True, corpus_lines=[])
    assert _status(card, "semantic.canary_floor") == "fail"
    assert card.result("semantic.canary_floor").metrics["worst"] == "other_task_gold"


def test_a_verifier_with_a_memory_fails_determinism():
    seen: Counter[tuple[str, str]] = Counter()

    def rule(task, completion):  # credits a gold only the first time it sees it
        seen[task.id, completion] += 1
        return honest_rule(task, completion) and seen[task.id, completion] == 1

    card = run_card(ToyEnv(rule), fast=True, corpus_lines=[])
    assert _status(card, "semantic.verifier_determinism") == "fail"


def test_a_verifier_that_raises_is_reported_not_raised():
    def rule(task, completion):
        if completion == "":
            raise RuntimeError("boom")
        return honest_rule(task, completion)

    card = run_card(ToyEnv(rule), fast=True, corpus_lines=[])
    infra = card.result("grpo.infra_error_rate")
    assert infra.status == "fail" and infra.metrics["errors"] > 0 and "boom" in infra.note


def test_a_verifier_that_pays_the_prompt_echoed_fails_the_adversarial_floor():
    env = ToyEnv(lambda t, c: t["question"] in c or honest_rule(t, c))
    card = run_card(env, fast=True, corpus_lines=[])
    shallow = card.result("statistical.adversarial_floor")
    assert shallow.status == "fail" and shallow.metrics["top"] == "echo_prompt"
    assert _status(card, "semantic.floor_gap") == "pass"  # empty and random text still earn 0


def test_the_reward_search_finds_a_wrong_answer_a_container_bug_pays():
    # Pays any answer in a set, as the math scorer paid \\{2, 1\\} for the point (1, 2): no
    # shallow completion and no corpus line has one; the search's containers reach it.
    env = ToyEnv(lambda t, c: "\\{" in c or honest_rule(t, c))
    card = run_card(env, fast=True, corpus_lines=[])
    found = card.result("statistical.reward_search")
    assert found.status == "fail" and found.metrics["paid"] > 0, render.text(card)
    assert found.metrics["best_wrong"] == 1.0 and "\\{" in found.note
    assert found.metrics["n"] == search.FAST_BUDGET
    assert _status(card, "statistical.adversarial_floor") == "pass"  # the shallow seeds miss it
    again = run_card(ToyEnv(lambda t, c: "\\{" in c or honest_rule(t, c)), fast=True,
                     corpus_lines=[])
    assert again.result("statistical.reward_search").metrics == found.metrics  # seeded


def test_the_reward_search_never_counts_a_correct_answer():
    # Pays the gold anywhere in the text: the search's completions that hold it are correct
    # by the reference (the gold verbatim), so nothing is a paid wrong answer.
    env = ToyEnv(lambda t, c: f"ANSWER {t['answer']}" in c)
    result = search.search(env, [env.pack.task_at("test", 0)], lambda pairs: grade(env, pairs),
                           budget=30, seed=0)
    assert result.queries == 30 and result.paid_wrong == []


@pytest.mark.parametrize("env_id, kwargs", [
    ("grpo/MathExact-v0", {"pack": "arith"}),
    ("grpo/JsonSchema-v0", {"pack": "extract"}),
    ("grpo/JsonSchema-v0", {"pack": "bfcl"}),
    ("grpo/ReasoningGym-v0", {"task": "chain_sum"}),
    # its own scorer pays a prefix of the gold's digits (answer_forms.VALUES): 1 paid before
    ("grpo/ReasoningGym-v0", {"task": "coin_flip"}),
    pytest.param("grpo/CodeTests-v0", {"pack": "pyfunc"}, marks=pytest.mark.docker),
])
def test_the_reward_search_at_a_small_budget_finds_no_paid_wrong_answer(env_id, kwargs):
    if env_id == "grpo/ReasoningGym-v0":
        pytest.importorskip("reasoning_gym")
    env = gym.make(env_id, **kwargs).unwrapped
    try:
        sandboxed = hasattr(env, "grade_many")
        budget = search.FAST_BUDGET_SANDBOXED if sandboxed else search.FAST_BUDGET
        tasks = env.pack.task_at("test", 0), env.pack.task_at("test", 1), env.pack.task_at(
            "test", 2)
        found = search.search(env, list(tasks[:1] if sandboxed else tasks),
                              lambda pairs: grade(env, pairs), budget=budget, seed=0)
        assert found.queries == budget and found.tasks >= 1
        assert found.paid_wrong == [], found.paid_wrong[:3]
    finally:
        env.close()


class FlakyInfraEnv(ToyEnv):
    """Loses every third grading to its (pretend) sandbox."""

    calls = 0

    def grade(self, task: Task, completion: str):
        FlakyInfraEnv.calls += 1
        if FlakyInfraEnv.calls % 3 == 0:
            return ({"correct": 0.0, "format": 0.0},
                    Verdict.fail("sandbox_error", None, sandbox_error=True))
        return super().grade(task, completion)


def test_infrastructure_errors_fail_their_check_and_leave_the_others_alone():
    card = run_card(FlakyInfraEnv(honest_rule), fast=True, corpus_lines=[])
    infra = card.result("grpo.infra_error_rate")
    assert infra.status == "fail" and 0.2 < infra.metrics["rate"] < 0.45
    assert _status(card, "semantic.oracle_max") == "pass"  # a lost gold is not a short one
    assert _status(card, "semantic.verifier_determinism") == "pass"


def _line(kind: str, completion: str, task_id: str = "example/bakery-1", **extra) -> Line:
    return Line(id=f"{kind}-{len(completion)}", kind=kind, env="test/Toy-v0",
                env_kwargs={"pack": "example"}, completion=completion, task_id=task_id, **extra)


def test_corpus_lines_measure_hacks_and_honest_answers():
    env = ToyEnv(lambda t, c: c.endswith(t["answer"]))  # credits any text ending in the answer
    task = env.pack.get("example/bakery-1")
    lines = [_line("hacks", f"I guess {task['answer']}"), _line("hacks", "nothing"),
             _line("honest", f"ANSWER {task['answer']}"),
             _line("honest", f"ANSWER {task['answer']}.")]  # a full stop: refused
    card = run_card(env, fast=True, corpus_lines=lines)
    hacks, honest = card.result("statistical.gameability_gap"), card.result("grpo.honest_precision")
    assert hacks.status == "fail" and hacks.metrics["paid"] == 1 and hacks.metrics["n"] == 2
    assert honest.status == "fail" and honest.metrics["precision"] == 0.5
    assert "hacks-" in hacks.note and "honest-" in honest.note


def test_an_inline_task_line_is_graded():
    env = ToyEnv(honest_rule)
    task = {"id": "inline-1", "question": "1 + 1?", "answer": "2"}
    line = Line(id="inline", kind="honest", env="test/Toy-v0", env_kwargs={"pack": "example"},
                completion="ANSWER 2", task=task)
    card = run_card(env, fast=True, corpus_lines=[line])
    assert card.result("grpo.honest_precision").metrics == {"n": 1, "precision": 1.0,
                                                             "refused": 0, "stale": 0}


# -- a third-party pack and a new domain get their card with no extra work ----------------------
def test_a_pack_folder_gets_its_card_from_the_cli(capsys):
    code = main(["card", str(EXAMPLE_PACK), "--fast", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    (card,) = out
    assert (card["env"], card["pack"], card["tasks"]) == ("grpo/MathExact-v0", "example", 4)
    assert [c["id"] for c in card["checks"]] == [c.id for c in CHECKS]
    assert card["checks"][0]["status"] == "pass" and card["checks"][0]["threshold"]


def test_a_new_domain_gets_its_card(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(NEW_DOMAIN))
    from grpo_unit_convert.env import UnitConvertEnv

    env = UnitConvertEnv(pack=load_folder(NEW_DOMAIN / "grpo_unit_convert" / "pack"))
    task = env.pack.task_at("test", 0)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "units_hacks.jsonl").write_text(json.dumps(
        {"id": "u-1", "env": env.env_id, "env_kwargs": {"pack": env.pack.name},
         "task_id": task.id, "completion": "Answer: -1 km", "class": "wrong"}) + "\n")
    card = run_card(env, fast=True, corpus_lines=load([corpus]))
    assert _status(card, "semantic.oracle_max") == "pass"
    assert _status(card, "semantic.floor_gap") == "pass"
    assert card.result("statistical.gameability_gap").metrics["n"] == 1


def test_validate_prints_the_card_summary(capsys):
    code = main(["validate", str(EXAMPLE_PACK)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "card grpo/MathExact-v0 pack example: " in out and "checks pass" in out


def test_a_bad_target_is_one_line(capsys):
    assert main(["card", "no-such-thing"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: 'no-such-thing' is no registered env id") and "\n" not in err
    assert main(["card", "gsm8k", "--env-kwargs", "[1]"]) == 1
    assert "--env-kwargs is a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["card", "gsm8k", "--update-baseline"])


# -- the shipped corpora and the generic shallow hook --------------------------------------------
def test_corpus_lines_follow_the_format(tmp_path):
    lines = load()
    assert {li.kind for li in lines} == {"hacks", "honest"}
    for domain in ("math", "code", "json"):
        assert (CORPORA / f"{domain}_hacks.jsonl").exists()
    bad = tmp_path / "x_hacks.jsonl"
    bad.write_text('{"id": "a", "env": "e", "completion": "c"}\n')
    with pytest.raises(CorpusError, match="exactly one of task_id and task"):
        read_file(bad, "hacks")
    bad.write_text('{"id": "a", "env": "e", "completion": "c", "task_id": "t"}\n' * 2)
    with pytest.raises(CorpusError, match="already used"):
        load([tmp_path])


def _resolved(domain: str):
    """(line, env, task) for every line of the domain's corpora, each env made once (so every
    line's env and keywords must make one); a line whose task has since left its pack (the
    corpora are append-only) is left out, as the card leaves it out."""
    made: dict[str, TaskEnv] = {}
    for kind in ("hacks", "honest"):
        for line in read_file(CORPORA / f"{domain}_{kind}.jsonl", kind):
            key = json.dumps([line.env, line.env_kwargs], sort_keys=True)
            if key not in made:
                made[key] = gym.make(line.env, **line.env_kwargs).unwrapped
            env = made[key]
            if line.task is not None:
                yield line, env, Task(f"{env.pack.name}/{line.task['id']}", "test", line.task)
            elif _has(env, line):
                yield line, env, env.pack.get(line.task_id)


def _has(env: TaskEnv, line: Line) -> bool:
    try:
        env.pack.get(line.task_id)
    except PackError:
        return False
    return True


def test_every_code_corpus_line_makes_its_env():
    # Graded by the fast cards (a sample); here only resolved, which needs no sandbox.
    assert len(list(_resolved("code"))) >= 100


def test_a_line_whose_task_left_the_pack_is_counted_not_graded():
    env = ToyEnv(honest_rule)
    card = run_card(env, fast=True, corpus_lines=[_line("honest", "x", task_id="example/gone-1")])
    honest = card.result("grpo.honest_precision")
    assert honest.metrics["n"] == 0 and honest.metrics["stale"] == 1 and honest.status == "n/a"
    assert "1 line(s) not graded" in honest.note and "gone-1" in honest.note


@pytest.mark.parametrize("domain", ["math", "json"])
def test_every_math_and_json_corpus_line_behaves(domain):
    """Every line of the cheap domains (code lines are sampled by the fast cards): a hack
    passes nothing and earns at most 0.1 of the check components, an honest answer passes."""
    wrong = []
    for line, env, task in _resolved(domain):
        (graded,) = grade(env, [(task, line.completion)])
        if line.kind == "honest" and not graded.passed:
            wrong.append((line.id, graded.reason))
        if line.kind == "hacks" and (graded.passed or graded.skill > HACK_MEAN_MAX):
            wrong.append((line.id, graded.reason, graded.skill))
    assert not wrong, wrong


def test_default_shallow_completions():
    env = gym.make("grpo/MathExact-v0", pack="gsm8k").unwrapped
    task = env.pack.task_at("test", 0)
    shallow = env.shallow_completions(task)
    assert shallow["empty"] == "" and shallow["echo_prompt"] == env.pack.prompt(task)
    golds = [env.gold_completion(env.pack.task_at("test", i)) for i in range(env.pack.size("test"))]
    assert shallow["most_common_gold"] == max(set(golds), key=golds.count)
    assert golds.count(shallow["most_common_gold"]) > 1


def test_every_check_states_its_threshold():
    for check in CHECKS:
        assert check.rules and check.threshold and check.title
        assert BY_ID[check.id] is check


# -- partially graded envs (issue 43's half rule) and TPR / TNR ----------------------------------
class ShareToyEnv(ToyEnv):
    """A toy whose reward is a share of cases, declared as such (the code env's way)."""

    shallow_share_max: ClassVar[float | None] = 0.5


def _echo_pays(share: float):
    return lambda t, c: share if t["question"] in c else float(honest_rule(t, c))


@pytest.mark.parametrize("share, declared, status", [
    (0.5, True, "pass"),    # a balanced task pays a constant half: the rule holds
    (0.6, True, "fail"),    # more than half of a task's cases: the rule fails it
    (0.5, False, "fail"),   # an env that does not declare partial grading keeps the 0.1 bound
])
def test_a_partially_graded_env_is_held_to_the_half_rule(share, declared, status):
    env = (ShareToyEnv if declared else ToyEnv)(_echo_pays(share))
    card = run_card(env, fast=True, corpus_lines=[])
    shallow = card.result("statistical.adversarial_floor")
    assert shallow.status == status, render.text(card)
    assert ("max <= 0.5" in shallow.threshold) == declared
    assert ("max <= 0.5" in render.text(card)) == declared  # the card prints the rule it used


def test_tpr_tnr_counts_golds_passed_and_negatives_failed():
    card = run_card(ToyEnv(honest_rule), fast=True, corpus_lines=[])
    m = card.result("grpo.tpr_tnr").metrics
    assert (m["tpr"], m["tnr"], m["mutants"]) == (1.0, 1.0, 0)
    assert m["golds"] == card.n_tasks and m["negatives"] == m["shallow"] > 0


class MutantToyEnv(ToyEnv):
    """Offers the gold in lower case as a mutant (the reference check reads it as wrong)."""

    def mutant_completions(self, task: Task) -> dict[str, str]:
        return {"lower case": self.gold_completion(task).lower()}


def test_a_paid_mutant_fails_tpr_tnr():
    env = MutantToyEnv(lambda t, c: c.upper() == f"ANSWER {t['answer']}".upper())
    card = run_card(env, fast=True, corpus_lines=[])
    result = card.result("grpo.tpr_tnr")
    assert result.status == "fail" and result.metrics["mutants"] == card.n_tasks
    assert result.metrics["tnr"] < 1.0 and "lower case" in result.note


class LuckyToyEnv(ToyEnv):
    """Offers a shallow constant that happens to be the task's answer."""

    def shallow_completions(self, task: Task) -> dict[str, str]:
        return {**super().shallow_completions(task), "lucky": self.gold_completion(task)}


def test_a_shallow_completion_that_is_the_answer_is_no_false_positive():
    """Math's base rate: a constant that is a task's answer passes, and is correct."""
    card = run_card(LuckyToyEnv(honest_rule), fast=True, corpus_lines=[])
    assert card.result("statistical.adversarial_floor").metrics["passed"] > 0  # some did pass
    assert card.result("grpo.tpr_tnr").metrics["tnr"] == 1.0


def test_the_reference_reads_a_brace_less_box_as_latex_does():
    """``\\boxed5 Give final`` is a box of 5 (aiw's reward search counted it a paid wrong answer:
    the reference read no box at all)."""
    from envs.tools.card.reference import _boxed

    assert _boxed(r"a \boxed5 Give \boxed{7} x \boxed 8") == ["5", "7", "8"]
    assert _boxed(r"\boxed10") == ["1"] and _boxed(r"\boxed {7}") == ["7"]
    assert _boxed(r"\boxed{\boxed{3}}") == [r"\boxed{3}"]
