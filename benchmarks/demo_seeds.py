"""Does the demo's learning hold across seeds and thread counts? ``make demo``'s configuration,
each run in a fresh process, with held-out accuracy before and after, and its curves.

    python benchmarks/demo_seeds.py --seeds 0 1 2 --threads 1 2 --out runs/demo-seeds
    python benchmarks/demo_seeds.py --out runs/demo-seeds --report-only   # redraw, re-table
    python benchmarks/demo_seeds.py --seeds 3 4 5 --threads 2 --engines hf vllm --out runs/engines

Each (seed, threads) pair runs ``python -m learner.demo --seed S --num-threads T`` in a new
process, one after another (never two at once: they would share the cores), in
``OUT/seed<S>-t<T>``; flags after ``--`` go to every demo run. The thread count changes the
float summation order, hence the samples, so it is a second source of spread beside the seed.
``--engines hf vllm`` runs each pair with each sampling engine (``--rollout-engine``; a vllm
run in ``OUT/seed<S>-t<T>-vllm``), alternating which goes first from one seed to the next, and
the table gives each engine's median and minimum over the same seeds.

It writes ``OUT/heldout_curves.png`` (every run's held-out greedy accuracy by step, with the
median and the min-max band), ``OUT/table.md`` and ``OUT/summary.json``: per run, held-out
accuracy before and after, minutes, the CPU minutes the run used and the load averages when it
started and ended (on a shared machine, the load is part of the timing). So that a number comes
with a look at what earned it, the table also reads each run's final held-out completions
(``heldout.jsonl``): of the passes, how many were ``x + 0`` items and how many gave the run's
most common answer (a stock answer would show there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class RunResult:
    seed: int
    threads: int
    engine: str
    before: float | None
    after: float | None
    minutes: float
    cpu_minutes: float
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float]
    passes: int = 0
    zero_operand_passes: int = 0  # passes on "x + 0" / "0 + x" items
    top_answer: str = ""  # the answer most passes gave, and how many
    top_answer_passes: int = 0
    exit_code: int = 0


def run_dir(out: Path, seed: int, threads: int, engine: str = "hf") -> Path:
    return out / (f"seed{seed}-t{threads}" + ("" if engine == "hf" else f"-{engine}"))


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_demo(out: Path, seed: int, threads: int, engine: str, extra: list[str]
             ) -> tuple[int, dict[str, Any]]:
    """One demo in a fresh process; its exit code, wall and CPU time and load averages."""
    cmd = [sys.executable, "-m", "learner.demo", "--seed", str(seed), "--num-threads",
           str(threads), "--output-dir", str(run_dir(out, seed, threads, engine)),
           "--rollout-engine", engine, "--no-progress", *extra]
    print(f"== seed {seed}, {threads} thread(s), {engine}: {' '.join(cmd[1:])}", flush=True)
    load_start, cpu_start, start = os.getloadavg(), child_cpu_seconds(), time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    timing = {"minutes": (time.perf_counter() - start) / 60,
              "cpu_minutes": (child_cpu_seconds() - cpu_start) / 60,
              "load_start": tuple(round(x, 2) for x in load_start),
              "load_end": tuple(round(x, 2) for x in os.getloadavg())}
    return code, timing


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A run log's complete lines (``run_log.read_log``); none for a run that wrote none."""
    from learner.training.run_log import read_log

    return read_log(path) if path.is_file() else []


def heldout_curve(folder: Path) -> list[tuple[int, float]]:
    """(step, held-out greedy accuracy) for every evaluation the run logged."""
    return [(r["step"], r["eval/accuracy"]) for r in read_jsonl(folder / "metrics.jsonl")
            if isinstance(r.get("eval/accuracy"), int | float)]


ZERO_OPERAND = re.compile(r"(?:^|\D)0 \+|\+ 0(?:\D|$)")


def final_passes(folder: Path) -> list[dict[str, Any]]:
    """The passed greedy completions of the run's last held-out evaluation."""
    rows = read_jsonl(folder / "heldout.jsonl")
    if not rows:
        return []
    last = max(r["step"] for r in rows)
    return [r for r in rows if r["step"] == last and r["passed"]]


def last_box(completion: str) -> str:
    """The answer as boxed (the demo credits only a boxed number)."""
    from tasks.boxes import find_boxes

    boxes = find_boxes(completion)
    return boxes[-1].content.strip() if boxes else ""


def inspect_passes(result: RunResult, folder: Path) -> None:
    """What the final held-out passes were: ``x + 0`` items, and the most repeated answer."""
    passes = final_passes(folder)
    result.passes = len(passes)
    result.zero_operand_passes = sum(bool(ZERO_OPERAND.search(p["prompt"].splitlines()[0]))
                                     for p in passes)
    answers = Counter(last_box(p["completion"]) for p in passes)
    if answers:
        result.top_answer, result.top_answer_passes = answers.most_common(1)[0]


def collect(out: Path, seed: int, threads: int, code: int, timing: dict[str, Any],
            engine: str = "hf") -> RunResult:
    folder = run_dir(out, seed, threads, engine)
    curve = heldout_curve(folder)
    result = RunResult(seed, threads, engine,
                       before=curve[0][1] if curve and curve[0][0] == 0 else None,
                       after=curve[-1][1] if curve and curve[-1][0] > 0 else None,
                       exit_code=code, **timing)
    inspect_passes(result, folder)
    return result


def train_curve(folder: Path) -> list[tuple[int, float]]:
    """(step, share of the step's sampled completions that were right) for every step."""
    return [(r["step"], r["accuracy"]) for r in read_jsonl(folder / "metrics.jsonl")
            if r.get("step", 0) > 0 and isinstance(r.get("accuracy"), int | float)]


def _runs_and_medians(ax: Any, curves: dict[tuple[int, int, str], dict[int, float]]) -> None:
    """Every run's curve, thin (dashed for vllm), and each engine's median over its runs, thick,
    with the min-max band of all runs over the steps every run has."""
    for (seed, threads, engine), curve in curves.items():
        ax.plot(list(curve), list(curve.values()), lw=1, alpha=0.5, marker="o", ms=2,
                ls="-" if engine == "hf" else "--",
                label=f"seed {seed}, {threads} thread{'s' if threads > 1 else ''}, {engine}")
    steps = sorted(set.intersection(*(set(c) for c in curves.values()))) if curves else []
    if not steps:
        return
    values = [[c[s] for c in curves.values()] for s in steps]
    ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], color="grey",
                    alpha=0.2, label="min-max")
    engines = list(dict.fromkeys(e for _, _, e in curves))
    for engine, colour in zip(engines, ("black", "tab:red", "tab:blue"), strict=False):
        mine = [c for (_, _, e), c in curves.items() if e == engine]
        ax.plot(steps, [statistics.median(c[s] for c in mine) for s in steps], color=colour,
                lw=2.5, ls="-" if engine == "hf" else "--",
                label=f"median{f' ({engine})' if len(engines) > 1 else ''}")


def plot_curves(out: Path, results: list[RunResult]) -> Path:
    """Every run's held-out accuracy and its training samples' accuracy by step, with each
    engine's median over runs and the min-max band, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    folders = {(r.seed, r.threads, r.engine): run_dir(out, r.seed, r.threads, r.engine)
               for r in results}
    fig, (held, train) = plt.subplots(1, 2, figsize=(12, 4.5))
    _runs_and_medians(held, {k: dict(heldout_curve(f)) for k, f in folders.items()})
    _runs_and_medians(train, {k: dict(train_curve(f)) for k, f in folders.items()})
    held.set_ylabel("held-out greedy accuracy")
    train.set_ylabel("accuracy of the step's samples")
    for ax in (held, train):
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    held.legend(fontsize=6, loc="upper left")
    fig.suptitle(f"learner.demo over {len(folders)} runs")
    fig.tight_layout()
    path = out / "heldout_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def table(results: list[RunResult]) -> str:
    """Markdown: one row per run, then the median and minimum of the final accuracy."""
    lines = ["| seed | threads | engine | held-out before | held-out after | minutes | "
             "CPU minutes | load at start (1/5/15 min) | load at end | passes: `x + 0` items | "
             "passes: most common answer |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r.seed} | {r.threads} | {r.engine} | {_pct(r.before)} | {_pct(r.after)} | "
            f"{r.minutes:.1f} | {r.cpu_minutes:.1f} | {' '.join(map(str, r.load_start))} | "
            f"{' '.join(map(str, r.load_end))} | {r.zero_operand_passes} of {r.passes} | "
            f"`{r.top_answer}` x{r.top_answer_passes} |")
    engines = list(dict.fromkeys(r.engine for r in results))
    lines.append("")
    for engine in engines:
        mine = [r for r in results if r.engine == engine]
        finals = [r.after for r in mine if r.after is not None]
        if finals:
            lines.append(f"held-out after{f' ({engine})' if len(engines) > 1 else ''}: median "
                         f"{statistics.median(finals):.1%}, minimum {min(finals):.1%} over "
                         f"{len(finals)} runs; longest run {max(r.minutes for r in mine):.1f} "
                         "min")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engines", nargs="+", default=["hf"], choices=("hf", "vllm"),
                        help="sampling engines to run each (seed, threads) with; their order "
                        "alternates from one seed to the next")
    parser.add_argument("--out", default="runs/demo-seeds")
    parser.add_argument("--report-only", action="store_true",
                        help="redraw the plot and table from the runs already in --out")
    parser.add_argument("extra", nargs=argparse.REMAINDER,
                        help="after --: flags for every demo run")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    summary_path = out / "summary.json"
    known = {(r["seed"], r["threads"], r.get("engine", "hf")): {"engine": "hf", **r} for r in
             (json.loads(summary_path.read_text()) if summary_path.is_file() else [])}
    results = []
    runs = [(seed, threads, engine) for i, seed in enumerate(args.seeds)
            for threads in args.threads
            for engine in (args.engines if i % 2 == 0 else args.engines[::-1])]
    for seed, threads, engine in runs:
        if args.report_only:
            old = known.get((seed, threads, engine))
            if old is None:
                continue
            code = old["exit_code"]
            timing = {k: old[k] for k in ("minutes", "cpu_minutes", "load_start",
                                          "load_end")}
        else:
            code, timing = run_demo(out, seed, threads, engine, extra)
        results.append(collect(out, seed, threads, code, timing, engine))
        # Saved after every run: a long sweep that is stopped keeps what it measured.
        merged = {**known, **{(r.seed, r.threads, r.engine): asdict(r) for r in results}}
        summary_path.write_text(json.dumps(list(merged.values()), indent=1))
    if not results:
        print(f"error: no runs in {out}", file=sys.stderr)
        return 1
    text = table(results)
    (out / "table.md").write_text(text + "\n")
    print(text)
    print(f"plot: {plot_curves(out, results)}")
    return 0 if all(r.exit_code == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
