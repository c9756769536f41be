"""The domain seed benchmark's report (``benchmarks/domain_seeds.py``) over fabricated run
folders: its table's numbers, the credited completions it quotes, the plot, and --report-only.
No training: the folders hold the logs the trainer would write."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import domain_seeds
finally:
    sys.path.remove(str(ROOT / "benchmarks"))

KWARGS = {"pack": "arith", "level": 1}


def _fake_run(folder: Path, accuracy: list[tuple[int, float]], peaks: list[float]) -> None:
    """A finished learner.run folder: metrics, config.json with its recipe record, samples."""
    folder.mkdir(parents=True)
    rows = [{"step": step, "eval/accuracy": acc} for step, acc in accuracy]
    for row, peak in zip(rows, peaks, strict=True):
        row["memory/peak_rss_gb"] = peak
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"env": "grpo/MathExact-v0", "env_kwargs": KWARGS, "rollout_engine": "hf",
              "recipe": {"variant": "cpu", "sources": ["math_exact.toml [cpu]"], "why": "",
                         "applied": {"env_kwargs": KWARGS}, "overridden": []},
              "provenance": {"cpu_threads": 1}}
    (folder / "config.json").write_text(json.dumps(config))
    groups = [{"step": 5, "prompt": "What is 1 + 1?\n\nGive...", "completions": ["\\boxed{2}"],
               "passed": [True]},
              {"step": 10, "prompt": "What is 2 + 6?\n\nGive...",
               "completions": ["\\boxed{8}", "\\boxed{9}", "so \\boxed{8}"],
               "passed": [True, False, True]}]
    (folder / "samples.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))


def test_the_domain_table_gives_each_seeds_rise_peaks_and_recipe_and_the_median(tmp_path):
    out, env = tmp_path / "ds", "grpo/MathExact-v0"
    _fake_run(domain_seeds.run_dir(out, env, 0), [(0, 0.1), (5, 0.3), (10, 0.6)],
              [0.0, 1.2, 1.5])
    _fake_run(domain_seeds.run_dir(out, env, 1), [(0, 0.2), (5, 0.25), (10, 0.4)],
              [0.0, 1.1, 1.3])
    _fake_run(domain_seeds.run_dir(out, env, 2), [(0, 0.0), (10, 0.9)], [0.0, 1.0])
    assert domain_seeds.run_dir(out, env, 1) == out / "MathExact-v0" / "seed-1"
    runs = [domain_seeds.collect(out, env, 0, 0, 12.0, 2.5),
            domain_seeds.collect(out, env, 1, 0, 11.0, 2.25),
            domain_seeds.collect(out, env, 2, 1, 3.0, None)]
    assert [(r.before, r.after) for r in runs] == [(0.1, 0.6), (0.2, 0.4), (0.0, 0.9)]
    assert [round(r.rise, 6) for r in runs] == [50.0, 20.0, 90.0]
    assert [r.logged_peak_gb for r in runs] == [1.5, 1.3, 1.0]
    assert (runs[0].variant, runs[0].env_kwargs, runs[0].cpu_threads) == ("cpu", KWARGS, 1)
    text = domain_seeds.table(runs)
    assert ('| 0 | 10.0% | 60.0% | +50.0 | 12.0 | 2.50 | 1.50 | cpu | '
            '`{"level": 1, "pack": "arith"}` | 0 |' in text)
    assert "| 1 | 20.0% | 40.0% | +20.0 | 11.0 | 2.25 | 1.30 | cpu |" in text
    assert "| 2 | 0.0% | 90.0% | +90.0 | 3.0 | - | 1.00 | cpu |" in text and "| 1 |\n" in text
    assert "rise: median +50.0 points, minimum +20.0 points over 3 runs" in text

    md = domain_seeds.report(out, runs)
    assert (out / "domain_seeds.md").read_text() == md
    assert md.startswith("## grpo/MathExact-v0\n\n" + text)
    # The latest step's distinct credited completions, two per run, with the table.
    assert "  step 10  'What is 2 + 6?' -> '\\\\boxed{8}'" in md
    assert "  step 10  'What is 2 + 6?' -> 'so \\\\boxed{8}'" in md and "step 5" not in md
    assert (out / "MathExact-v0" / "heldout_curves.png").stat().st_size > 0


def test_report_only_rebuilds_the_tables_from_the_saved_timings_without_running(tmp_path,
                                                                                capsys):
    out, env = tmp_path / "ds", "grpo/JsonSchema-v0"
    _fake_run(domain_seeds.run_dir(out, env, 3), [(0, 0.25), (5, 0.75)], [0.5, 0.75])
    saved = domain_seeds.collect(out, env, 3, 0, 7.5, 1.75)
    from dataclasses import asdict

    (out / "domain_seeds.json").write_text(json.dumps([asdict(saved)]))
    assert domain_seeds.main(["--envs", env, "--seeds", "3", "--out", str(out),
                              "--report-only"]) == 0
    assert "| 3 | 25.0% | 75.0% | +50.0 | 7.5 | 1.75 | 0.75 | cpu |" in capsys.readouterr().out
    assert "## grpo/JsonSchema-v0" in (out / "domain_seeds.md").read_text()
    assert (out / "JsonSchema-v0" / "heldout_curves.png").is_file()
    # No saved run: nothing to report.
    assert domain_seeds.main(["--envs", env, "--seeds", "4", "--out", str(out),
                              "--report-only"]) == 1


def test_each_run_is_the_design_cards_command_with_the_flags_after_the_double_dash_last():
    cmd = domain_seeds.command(Path("o"), "grpo/CodeTests-v0", 2, 5, None, ["--steps", "2"])
    assert cmd[1:] == ["-m", "learner.run", "--env", "grpo/CodeTests-v0", "--seed", "2",
                       "--output-dir", str(Path("o/CodeTests-v0/seed-2")), "--overwrite",
                       "--eval-every", "5", "--steps", "2"]
    assert domain_seeds.command(Path("o"), "grpo/CodeTests-v0", 2, 5, 1, [])[-2:] == [
        "--num-threads", "1"]


def test_an_auto_engine_is_read_back_from_the_runs_device_and_packages():
    cpu = {"rollout_engine": "auto", "provenance": {"device": "cpu", "versions": {"vllm": "1"}}}
    assert domain_seeds.engine_used(cpu) == "hf"
    gpu = {"rollout_engine": "auto", "provenance": {"device": "cuda", "versions": {"vllm": "1"}}}
    assert domain_seeds.engine_used(gpu) == "vllm"
    gpu["provenance"]["versions"] = {}
    assert domain_seeds.engine_used(gpu) == "hf"
    assert domain_seeds.engine_used({"rollout_engine": "vllm"}) == "vllm"
