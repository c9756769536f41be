"""Report writing, key figures, deltas and the side-by-side comparison (no model)."""

from __future__ import annotations

import json

from learner.evaluation.report import compare_table, deltas, key_figures, load_report, write_report


def fake_report(accuracy: float, perturbed: float, general: float) -> dict:
    hist = {"edges": [0.0, 0.5, 1.0], "counts": [3, 1]}
    return {
        "metadata": {"model": f"m{accuracy}", "env": "grpo/MathExact-v0", "pack_version": "1+x",
                     "settings": {"temperature": 1.0}},
        "accuracy": {"greedy": accuracy, "reward": accuracy, "n": 4, "infra_errors": 0},
        "pass_at_k": {"k": 4, "n": 4, "pass@1": accuracy / 2, "pass@4": accuracy},
        "reward_distribution": {
            "total": {"n": 4, "mean": 0.25, "std": 0.4, "min": 0, "max": 1, "histogram": hist},
            "components": {"correct": {"n": 4, "mean": 0.25, "std": 0.4, "min": 0, "max": 1,
                                       "histogram": hist}}},
        "group_variance": {"n_groups": 4, "zero_variance_fraction": 0.75,
                           "zero_variance_groups": {"all_high": 1, "all_zero": 2},
                           "std": {"n": 4, "mean": 0.1, "std": 0.1, "min": 0, "max": 0.4},
                           "histogram": hist},
        "perturbations": {"env": "grpo/MathExact-v0", "check": ["correct"], "results": {
            "original": {"description": "the pack's own prompt", "n": 4, "score": accuracy,
                         "components": {"correct": accuracy}, "passed": accuracy,
                         "delta_vs_original": 0.0},
            "no_instruction": {"description": "no format <b>", "n": 4, "score": perturbed,
                               "components": {"correct": perturbed}, "passed": perturbed,
                               "delta_vs_original": perturbed - accuracy,
                               "example_prompt": "What is 2 + 3?"}}},
        "flagged": {"min_reward": 0.55, "n_checked": 20, "n_high_reward": 2, "n_flagged": 1,
                    "by_reason": {"no_reasoning": 1}, "samples": [{
                        "task_id": "arith/t0", "source": "greedy", "prompt": "What is 2 + 3?",
                        "completion": "\\boxed{5} <script>", "reward": 1.1,
                        "rewards": {"correct": 1.0, "format": 1.0},
                        "flags": [{"reason": "no_reasoning", "detail": "only 0 words"}]}]},
        "general": {"benchmark": {"name": "ARC-Easy", "license": "CC-BY-SA-4.0"}, "n": 4,
                    "scoring": "log-likelihood", "accuracy": general, "accuracy_per_char": 0.5,
                    "chance": 0.25, "records": []},
        "timing": {"greedy_s": 1.0, "total_s": 3.0},
    }


def test_key_figures_and_deltas():
    before, after = fake_report(0.5, 0.25, 0.5), fake_report(0.75, 0.0, 0.25)
    figures = key_figures(after)
    assert figures["accuracy (greedy)"] == 0.75 and figures["pass@4"] == 0.75
    assert figures["perturb/no_instruction"] == 0.0
    assert figures["flagged / high-reward"] == 0.5
    change = deltas(after, before)
    assert change["accuracy (greedy)"] == 0.25
    assert change["perturb/no_instruction"] == -0.25  # better in format, worse outside it
    assert change["general accuracy"] == -0.25


def test_compare_table_lists_both_reports_and_the_difference(tmp_path):
    a, b = fake_report(0.5, 0.25, 0.5), fake_report(0.75, 0.0, 0.25)
    table = compare_table(a, b, labels=("before", "after"))
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "before", "after", "B", "-", "A"]
    row = next(line for line in lines if line.startswith("accuracy (greedy)"))
    assert row.split()[-3:] == ["0.500", "0.750", "+0.250"]
    row = next(line for line in lines if line.startswith("perturb/no_instruction"))
    assert row.split()[-3:] == ["0.250", "0.000", "-0.250"]
    assert any(line.startswith("model") and "m0.5" in line and "m0.75" in line for line in lines)


def test_write_report_makes_json_html_and_plots(tmp_path):
    report = fake_report(0.75, 0.0, 0.25)
    report["baseline"] = {"model": "start", **fake_report(0.5, 0.25, 0.5)}
    report["deltas"] = deltas(report, report["baseline"])
    path = write_report(report, tmp_path)
    assert load_report(tmp_path) == json.loads(path.read_text())
    for png in ("rewards", "group_std", "perturbations"):
        data = (tmp_path / "plots" / f"{png}.png").read_bytes()
        assert data.startswith(b"\x89PNG")
    html = (tmp_path / "report.html").read_text()
    for needle in ("Reward distribution", "Group variance", "Perturbations", "Flagged samples",
                   "General capability", 'src="plots/rewards.png"', "no_reasoning",
                   "CC-BY-SA-4.0", "+0.250"):
        assert needle in html, needle
    assert "<script>" not in html and "&lt;script&gt;" in html  # completions are escaped
    assert "http" not in html.replace('http-equiv', '')  # readable offline: nothing fetched
