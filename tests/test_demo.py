"""The demo's report: held-out completions logged with their grades (``heldout.jsonl``), what the
demo prints from them, its plots, and the multi-seed benchmark's table over such runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from learner import demo
from learner.training.run_log import read_metrics
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parent.parent


def test_each_heldout_evaluation_logs_the_completions_its_accuracy_counted(tmp_path):
    cfg = h.config(tmp_path, steps=2, eval=True, eval_every=1, eval_size=3,
                   eval_perturbations=False)
    GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv()).train()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "heldout.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0] * 3 + [1] * 3 + [2] * 3
    env = h.ShortEnv()
    tasks = [env.pack.task_at("test", i) for i in range(3)]
    assert [r["task_id"] for r in rows[:3]] == [t.id for t in tasks]
    assert [r["prompt"] for r in rows[:3]] == [env.prompt(t) for t in tasks]
    # Each evaluation's accuracy is the share of its logged completions that passed, and each
    # logged grade is the env's grade of the logged completion.
    accuracy = {r["step"]: r["eval/accuracy"] for r in read_metrics(run) if "eval/accuracy" in r}
    for step in (0, 1, 2):
        logged = [r for r in rows if r["step"] == step]
        assert accuracy[step] == sum(r["passed"] for r in logged) / 3
    for r, task in zip(rows[-3:], tasks, strict=True):
        assert r["passed"] == env.score(task, r["completion"])[1]["passed"]


def _fake_run(folder: Path, passed: list[bool], accuracy: tuple[float, float] = (0.0, 0.5)) -> None:
    """A finished demo run's logs, as the trainer writes them."""
    folder.mkdir(parents=True)
    rows = [{"step": 0, "eval/accuracy": accuracy[0]},
            {"step": 1, "reward/mean": 0.5, "flags/credited_frac": 0.0},
            {"step": 2, "reward/mean": 0.9, "eval/accuracy": accuracy[1]}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    group = {"step": 2, "task_id": "arith/L1-0", "prompt": "What is 2 + 6?\n\nGive...",
             "completions": ["2 + 6 = \\boxed{8}", "\\boxed{9}"], "passed": [True, False]}
    (folder / "samples.jsonl").write_text(json.dumps(group) + "\n")
    questions = ["0 + 5", "4 + 7", "3 + 8", "9 + 6"]
    held = [{"step": 2, "task_id": f"arith/test-L1-{i}", "prompt": f"What is {q}?\n\nGive...",
             "completion": f"\\boxed{{{eval(q) if ok else 0}}}", "passed": ok}  # noqa: S307
            for i, (q, ok) in enumerate(zip(questions, passed, strict=True))]
    (folder / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))


def test_the_demo_prints_credited_samples_heldout_answers_and_where_its_plots_are(tmp_path,
                                                                                   capsys):
    run = tmp_path / "demo"
    _fake_run(run, [True, True, False, False])
    demo.show_results(run)
    out = capsys.readouterr().out
    assert "step 2  'What is 2 + 6?' -> '2 + 6 = \\\\boxed{8}'" in out
    assert "pass  'What is 0 + 5?' -> '\\\\boxed{5}'" in out
    assert "miss  'What is 3 + 8?' -> '\\\\boxed{0}'" in out
    assert f"plots: {run / 'plots'}/ (" in out and "heldout_accuracy" in out
    assert (run / "plots" / "heldout_accuracy.png").stat().st_size > 0


def test_the_seed_benchmark_tables_each_run_and_reads_what_its_passes_were(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import demo_seeds
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = tmp_path / "seeds"
    _fake_run(demo_seeds.run_dir(out, 0, 1), [True, True, True, False], accuracy=(0.0, 0.75))
    _fake_run(demo_seeds.run_dir(out, 1, 1), [True, False, True, True], accuracy=(0.0, 0.5))
    _fake_run(demo_seeds.run_dir(out, 0, 1, "vllm"), [True, False, False, False],
              accuracy=(0.0, 0.25))
    timing = {"minutes": 6.0, "cpu_minutes": 11.0, "load_start": (2.0, 2.1, 2.2),
              "load_end": (2.5, 2.4, 2.3)}
    results = [demo_seeds.collect(out, seed, 1, 0, timing) for seed in (0, 1)]
    assert [(r.before, r.after) for r in results] == [(0.0, 0.75), (0.0, 0.5)]
    # Both passed "0 + 5" (an x + 0 item); seed 0 passed "4 + 7" and "3 + 8", both 11.
    assert [(r.passes, r.zero_operand_passes) for r in results] == [(3, 1), (3, 1)]
    assert (results[0].top_answer, results[0].top_answer_passes) == ("11", 2)
    assert "median 62.5%, minimum 50.0% over 2 runs" in demo_seeds.table(results)
    # A second engine's run is read from its own folder and summarised on its own line.
    results.append(demo_seeds.collect(out, 0, 1, 0, timing, "vllm"))
    assert (results[2].engine, results[2].after, results[2].passes) == ("vllm", 0.25, 1)
    text = demo_seeds.table(results)
    assert ("| 0 | 1 | hf | 0.0% | 75.0% | 6.0 | 11.0 | 2.0 2.1 2.2 | 2.5 2.4 2.3 | 1 of 3 | "
            "`11` x2 |" in text)
    assert "| 0 | 1 | vllm | 0.0% | 25.0% |" in text
    assert "held-out after (hf): median 62.5%, minimum 50.0% over 2 runs" in text
    assert "held-out after (vllm): median 25.0%, minimum 25.0% over 1 runs" in text
    assert demo_seeds.plot_curves(out, results).stat().st_size > 0
