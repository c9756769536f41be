"""The report sections, from hand-made samples and from one tiny-model run on arith level 1."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from learner.evaluation.gates import (
    GateSettings,
    group_variance,
    heldout_accuracy,
    histogram,
    max_reward,
    perturbation_accuracy,
    perturbation_metrics,
    reward_distribution,
    run_gates,
)
from learner.evaluation.heldout import heldout_tasks
from learner.model import load_tokenizer, tiny_model
from tests import learner_helpers as h

TASKS, GROUP = 4, 3


def make_sample(group: int, reward: float, passed: bool | None = None, **extra) -> dict:
    passed = reward >= 1 if passed is None else passed
    return {"task_id": f"t{group}", "group": group, "prompt": "p", "completion": "c",
            "reward": reward, "rewards": {"correct": float(passed), "format": 1.0},
            "passed": passed, "truncated": False, "infra_error": False, **extra}


def test_histogram_counts_every_value():
    hist = histogram([0.0, 0.1, 0.5, 1.0, 1.1])
    assert sum(hist["counts"]) == 5
    assert len(hist["edges"]) == len(hist["counts"]) + 1
    assert hist["edges"][0] == 0.0 and hist["edges"][-1] == 1.1


def test_group_variance_finds_zero_variance_groups():
    samples = ([make_sample(0, r) for r in (1.1, 1.1, 1.1)]
               + [make_sample(1, r) for r in (0.0, 0.0, 0.0)]
               + [make_sample(2, r) for r in (0.0, 1.1, 0.1)]
               + [make_sample(3, 0.0, infra_error=True)])
    var = group_variance(samples)
    assert var["n_groups"] == 3
    assert var["zero_variance_fraction"] == pytest.approx(2 / 3)
    assert var["zero_variance_groups"] == {"all_high": 1, "all_zero": 1}
    assert sum(var["histogram"]["counts"]) == 3
    assert var["std"]["max"] == pytest.approx(0.6083, abs=1e-3)  # unbiased std of (0, 1.1, .1)


def test_reward_distribution_per_component():
    samples = [make_sample(0, 1.1), make_sample(0, 0.1, passed=False)]
    dist = reward_distribution(samples, ["correct", "format"])
    assert dist["total"]["mean"] == pytest.approx(0.6)
    assert dist["total"]["std"] == pytest.approx(0.5)
    assert dist["components"]["correct"]["mean"] == 0.5
    assert dist["components"]["format"]["mean"] == 1.0
    assert sum(dist["components"]["correct"]["histogram"]["counts"]) == 2
    # The total's histogram spans the weighted maximum, even when no sample reached it.
    low = reward_distribution([make_sample(0, 0.1, passed=False)], ["correct"], max_total=1.1)
    edges = low["total"]["histogram"]["edges"]
    assert edges[0] == 0.0 and edges[-1] == pytest.approx(1.1)


def test_heldout_accuracy_and_unbiased_pass_at_k():
    greedy = [make_sample(0, 1.1), make_sample(1, 0.0)]
    sampled = ([make_sample(0, r) for r in (1.1, 0.0, 0.0, 0.0)]
               + [make_sample(1, 0.0) for _ in range(4)])
    accuracy, passk = heldout_accuracy(greedy, sampled, 4)
    assert accuracy["greedy"] == 0.5 and accuracy["n"] == 2
    assert passk["pass@1"] == pytest.approx(0.125)  # (1/4 + 0) / 2
    assert passk["pass@4"] == pytest.approx(0.5)
    accuracy, passk = heldout_accuracy(greedy, sampled, 2)
    assert passk["pass@2"] == pytest.approx((1 - 3 / 6) / 2)  # 1 - C(3,2)/C(4,2) for task 0


@pytest.fixture(scope="module")
def setup():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    return tiny_model(), load_tokenizer(), env, heldout_tasks(env, TASKS)


@pytest.fixture(scope="module")
def report(setup):
    model, tokenizer, env, tasks = setup
    settings = GateSettings(group_size=GROUP, max_new_tokens=6, general_limit=4,
                            flag_min_reward=0.0)  # everything is "high reward": flags run
    return run_gates(model, tokenizer, env, tasks, settings)


def test_report_sections_are_consistent(report):
    n_samples = TASKS * GROUP
    assert report["accuracy"]["n"] == TASKS
    assert 0 <= report["accuracy"]["greedy"] <= 1
    passk = report["pass_at_k"]
    assert passk["k"] == GROUP and 0 <= passk["pass@1"] <= passk[f"pass@{GROUP}"] <= 1
    dist = report["reward_distribution"]
    assert sum(dist["total"]["histogram"]["counts"]) == n_samples
    assert set(dist["components"]) == {"correct", "format"}
    for comp in dist["components"].values():
        assert sum(comp["histogram"]["counts"]) == n_samples
        assert 0 <= comp["mean"] <= 1
    var = report["group_variance"]
    assert var["n_groups"] == TASKS and 0 <= var["zero_variance_fraction"] <= 1
    assert sum(var["histogram"]["counts"]) == TASKS
    assert len(report["samples"]) == n_samples + TASKS  # sampled + greedy
    assert set(report["timing"]) >= {"greedy_s", "sampled_s", "perturbations_s", "general_s"}


def test_perturbation_section(report):
    pert = report["perturbations"]
    assert pert["env"] == "grpo/MathExact-v0" and pert["check"] == ["correct"]
    results = pert["results"]
    assert list(results)[0] == "original"
    assert {"paraphrase", "final_answer_line", "no_instruction", "irrelevant_context",
            "numbers_in_words"} <= set(results)
    for name, r in results.items():
        assert r["n"] == TASKS and 0 <= r["score"] <= 1, name
        assert r["delta_vs_original"] == pytest.approx(r["score"] - results["original"]["score"])
    assert results["original"]["score"] == report["accuracy"]["greedy"]  # math: correct == passed
    assert "samples" not in pert


def test_flagged_section(report):
    flagged = report["flagged"]
    # greedy + sampled + one greedy completion per task and perturbation
    assert flagged["n_checked"] == TASKS * (1 + GROUP + 5)
    assert flagged["n_high_reward"] == flagged["n_checked"]  # min_reward 0
    assert flagged["n_flagged"] == len(flagged["samples"]) > 0
    for sample in flagged["samples"]:
        assert sample["flags"] and {"prompt", "completion", "rewards", "reward"} <= set(sample)
    assert sum(flagged["by_reason"].values()) >= flagged["n_flagged"]


def test_general_section(report):
    general = report["general"]
    assert general["n"] == 4 and 0 <= general["accuracy"] <= 1
    assert "CC-BY-SA-4.0" in general["benchmark"]["license"]
    assert all(0 <= r["pick"] < 4 for r in general["records"])


def test_perturbation_metrics_for_the_trainer(setup):
    model, tokenizer, env, tasks = setup
    metrics = perturbation_metrics(model, tokenizer, env, tasks[:2], max_new_tokens=4)
    assert set(metrics) == {f"eval/perturb/{n}" for n in (
        "original", "paraphrase", "final_answer_line", "no_instruction", "irrelevant_context",
        "numbers_in_words")}
    assert all(0 <= v <= 1 for v in metrics.values())
    assert max_reward(env) == pytest.approx(1.1)


def test_perturbations_gather_samples_across_processes(setup):
    model, tokenizer, env, tasks = setup
    twice = perturbation_accuracy(model, tokenizer, env, tasks[:1], max_new_tokens=2,
                                  gather=lambda rows: rows + rows)  # as if two ranks
    assert [r["n"] for r in twice["results"].values()] == [2] * 6


def test_perturbed_prompts_go_in_batches_with_each_variants_own_answers(setup, monkeypatch):
    """Every variant's prompts share generate calls that decode ``batch_size`` rows at once
    (one pass per variant made calls of a few prompts each), and each variant gets the greedy
    answers its own pass gives."""
    from learner.evaluation import heldout

    model, tokenizer, env, tasks = setup
    calls: list[int] = []
    real = heldout.sample_graded

    def counted(engine, tok, env_, chunk, prompts, **kwargs):
        calls.append(len(prompts))
        return real(engine, tok, env_, chunk, prompts, **kwargs)

    monkeypatch.setattr(heldout, "sample_graded", counted)
    pair = tasks[:2]
    with h.forward_shapes(model) as shapes:
        result = perturbation_accuracy(model, tokenizer, env, pair, max_new_tokens=6,
                                       batch_size=5)
    rows = [r for r, _ in shapes]
    variants = len(result["results"])
    assert variants == 6 and calls == [12]  # 6 variants x 2 tasks in one call ...
    assert max(rows) == 5  # ... of 5 rows at once
    for name, samples in result["samples"].items():
        alone = heldout.sample(model, tokenizer, env, pair, group_size=1, greedy=True,
                               max_new_tokens=6, batch_size=2,
                               build=lambda t, n=name: env.perturbations(t)[n])
        assert [s["completion"] for s in samples] == [s["completion"] for s in alone], name
        assert [s["prompt"] for s in samples] == [s["prompt"] for s in alone]
        assert [s["group"] for s in samples] == [0, 1]
