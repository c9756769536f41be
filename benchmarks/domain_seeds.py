"""Does each env's recipe learn across seeds? The design card's command per env and seed, each
in a fresh process, with held-out accuracy before and after, its curve, time and peak memory.

    python benchmarks/domain_seeds.py --out runs/domain-seeds
    python benchmarks/domain_seeds.py --envs grpo/MathExact-v0 --seeds 0 --out /tmp/ds -- --steps 2
    python benchmarks/domain_seeds.py --out runs/domain-seeds --report-only   # redraw, re-table

Each (env, seed) runs ``python -m learner.run --env ENV --seed S --output-dir
OUT/<env-name>/seed-S --overwrite --eval-every K`` and nothing else, so the run trains the env's
recipe with its defaults (``--threads N`` adds ``--num-threads N``; flags after ``--`` go to
every run, e.g. ``-- --steps 2`` for a quick look). Runs go one after another, never two at
once: they would share the cores and each other's memory. The parent samples the resident
memory of the run's whole process tree (grading workers included) every 0.2 s and keeps the
peak, beside the trainer's own logged ``memory/peak_rss_gb`` (its process only).

Per env it writes ``OUT/<env-name>/heldout_curves.png`` (held-out greedy accuracy by step, one
line per seed, with the median and the min-max band) and a table: per seed, held-out accuracy
before and after and the rise in points, minutes, both peaks, and the recipe variant and env
kwargs the run's ``config.json`` records; then the median and minimum rise. All tables go to
``OUT/domain_seeds.md`` and the rows to ``OUT/domain_seeds.json``. So that an accuracy comes
with a look at what earned it, each run's two latest credited completions (``samples.jsonl``)
are printed with it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):  # the project, and the sibling benchmark modules
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from demo_seeds import _pct, _runs_and_medians, heldout_curve, read_jsonl  # noqa: E402

DEFAULT_ENVS = ("grpo/CodeTests-v0", "grpo/MathExact-v0", "grpo/JsonSchema-v0")
SAMPLE_EVERY_S = 0.2
HEARTBEAT_S = 60.0  # a progress line this often: a CPU run of a recipe takes many minutes


@dataclass
class DomainRun:
    env: str
    seed: int
    before: float | None
    after: float | None
    minutes: float
    tree_peak_gb: float | None  # sampled by this script: the run's whole process tree
    logged_peak_gb: float | None  # max of the trainer's memory/peak_rss_gb: its process only
    variant: str | None  # the recipe variant config.json records (None: no recipe applied)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    cpu_threads: int | None = None
    engine: str = "hf"
    exit_code: int = 0

    @property
    def rise(self) -> float | None:
        """After minus before, in percentage points."""
        if self.before is None or self.after is None:
            return None
        return 100 * (self.after - self.before)


def env_name(env_id: str) -> str:
    """The folder name of an env id: ``grpo/MathExact-v0`` -> ``MathExact-v0``."""
    return env_id.rsplit("/", 1)[-1]


def run_dir(out: Path, env_id: str, seed: int) -> Path:
    return out / env_name(env_id) / f"seed-{seed}"


def command(out: Path, env_id: str, seed: int, eval_every: int, threads: int | None,
            extra: list[str]) -> list[str]:
    """The design card's command for one run; flags after ``--`` last, so they win."""
    cmd = [sys.executable, "-m", "learner.run", "--env", env_id, "--seed", str(seed),
           "--output-dir", str(run_dir(out, env_id, seed)), "--overwrite",
           "--eval-every", str(eval_every)]
    if threads is not None:
        cmd += ["--num-threads", str(threads)]
    return cmd + extra


def run_measured(cmd: list[str], label: str) -> tuple[int, float, float | None]:
    """Run ``cmd`` in a fresh process, with a progress line every ``HEARTBEAT_S``; its exit
    code, wall minutes and peak tree RSS (GB; None for a process gone before the first sample,
    rather than a peak of 0)."""
    from learner_memory import PeakSampler  # imports psutil and sides: only when running

    start = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=ROOT)
    with PeakSampler(child.pid, SAMPLE_EVERY_S) as sampler:
        try:
            while True:
                try:
                    code = child.wait(timeout=HEARTBEAT_S)
                    break
                except subprocess.TimeoutExpired:
                    print(f"-- {label}: {(time.perf_counter() - start) / 60:.1f} min elapsed, "
                          f"tree RSS peak so far {sampler.peak / 1e9:.2f} GB", flush=True)
        except KeyboardInterrupt:  # the child got the SIGINT too: let it save and stop
            child.wait()
            raise
    peak = sampler.peak
    return code, (time.perf_counter() - start) / 60, peak / 1e9 if peak else None


def engine_used(config: dict[str, Any]) -> str:
    """The sampling engine a run used. ``auto`` is not resolved in config.json, so it is read
    back by learner.sampling.engine's rule (vllm on CUDA where vLLM is installed, else hf)
    from the provenance: the run's device and its installed packages, not this process's."""
    choice = config.get("rollout_engine", "hf")
    if choice != "auto":
        return choice
    provenance = config.get("provenance") or {}
    cuda = provenance.get("device") == "cuda"
    return "vllm" if cuda and "vllm" in (provenance.get("versions") or {}) else "hf"


def collect(out: Path, env_id: str, seed: int, code: int, minutes: float,
            tree_peak_gb: float | None) -> DomainRun:
    """A run's figures from its folder: held-out curve, logged peak, config.json's recipe."""
    folder = run_dir(out, env_id, seed)
    curve = heldout_curve(folder)
    logged = [r["memory/peak_rss_gb"] for r in read_jsonl(folder / "metrics.jsonl")
              if isinstance(r.get("memory/peak_rss_gb"), int | float)]
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    recipe = config.get("env_recipe_record") or config.get("recipe") or {}
    return DomainRun(env_id, seed,
                     before=curve[0][1] if curve and curve[0][0] == 0 else None,
                     after=curve[-1][1] if curve and curve[-1][0] > 0 else None,
                     minutes=minutes, tree_peak_gb=tree_peak_gb,
                     logged_peak_gb=max(logged) if logged else None,
                     variant=recipe.get("variant"), env_kwargs=config.get("env_kwargs") or {},
                     cpu_threads=(config.get("provenance") or {}).get("cpu_threads"),
                     engine=engine_used(config), exit_code=code)


def credited_lines(folder: Path, n: int = 2, width: int = 240) -> list[str]:
    """The run's ``n`` latest credited completions, one line each, cut at ``width`` chars."""
    from learner.demo import credited_samples

    def cut(text: str) -> str:
        return text if len(text) <= width else text[:width] + "..."

    return [f"  step {step}  {cut(prompt.splitlines()[0] if prompt else '')!r} -> "
            f"{cut(text.strip())!r}" for step, prompt, text in credited_samples(folder, n)]


def credited_text(out: Path, run: DomainRun) -> str:
    """What the reward credited in a run, to go with its accuracy."""
    shown = credited_lines(run_dir(out, run.env, run.seed))
    head = (f"seed {run.seed}: what the reward credited (latest samples):" if shown else
            f"seed {run.seed}: no credited completion in the saved samples")
    return "\n".join([head, *shown])


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _points(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def table(runs: list[DomainRun]) -> str:
    """Markdown for one env: a row per seed, then the median and minimum rise."""
    lines = ["| seed | held-out before | held-out after | rise (points) | minutes | "
             "peak RSS GB (tree, sampled) | peak RSS GB (logged max) | recipe | env kwargs | "
             "exit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r.seed} | {_pct(r.before)} | {_pct(r.after)} | {_points(r.rise)} | "
                     f"{r.minutes:.1f} | {_gb(r.tree_peak_gb)} | {_gb(r.logged_peak_gb)} | "
                     f"{r.variant or '-'} | `{json.dumps(r.env_kwargs, sort_keys=True)}` | "
                     f"{r.exit_code} |")
    rises = [r.rise for r in runs if r.rise is not None]
    lines.append("")
    lines.append(f"rise: median {statistics.median(rises):+.1f} points, minimum "
                 f"{min(rises):+.1f} points over {len(rises)} runs" if rises else
                 "rise: no run has both a before and an after held-out accuracy")
    return "\n".join(lines)


def plot_env(out: Path, env_id: str, runs: list[DomainRun]) -> Path:
    """``OUT/<env-name>/heldout_curves.png``: held-out accuracy by step, a line per seed."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    # demo_seeds' helper keys a run by (seed, threads, engine) and labels it so.
    curves = {(r.seed, r.cpu_threads or 0, r.engine): dict(heldout_curve(run_dir(out, env_id,
                                                                              r.seed)))
              for r in runs}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _runs_and_medians(ax, {k: c for k, c in curves.items() if c})
    ax.set(xlabel="step", ylabel="held-out greedy accuracy", ylim=(-0.02, 1.02),
           title=f"{env_id}: {len(runs)} seed(s), recipe {runs[0].variant or '-'}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = out / env_name(env_id) / "heldout_curves.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(out: Path, runs: list[DomainRun]) -> str:
    """Every env's table and plot, and ``OUT/domain_seeds.md``; the markdown. Each table comes
    with the runs' credited completions: an accuracy is quoted with what it paid for."""
    sections = []
    for env_id in dict.fromkeys(r.env for r in runs):
        mine = [r for r in runs if r.env == env_id]
        plot = plot_env(out, env_id, mine)
        credited = "\n".join(credited_text(out, r) for r in mine)
        sections.append(f"## {env_id}\n\n{table(mine)}\n\nplot: `{plot.relative_to(out)}`\n\n"
                        f"~~~\n{credited}\n~~~\n")
    text = "\n".join(sections)
    (out / "domain_seeds.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/domain-seeds")
    parser.add_argument("--threads", type=int, default=None,
                        help="--num-threads for every run (default: the learner's, idle cores)")
    parser.add_argument("--eval-every", type=int, default=5,
                        help="held-out evaluation every K steps, so each run has a curve")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the tables and plots from the runs already in --out")
    parser.add_argument("extra", nargs=argparse.REMAINDER,
                        help="after --: flags for every learner.run")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    summary_path = out / "domain_seeds.json"
    # Timings and tree peaks exist only in the summary: --report-only reads them back.
    known = {(r["env"], r["seed"]): r for r in
             (json.loads(summary_path.read_text()) if summary_path.is_file() else [])}
    pairs = [(env_id, seed) for env_id in args.envs for seed in args.seeds]
    runs: list[DomainRun] = []
    for i, (env_id, seed) in enumerate(pairs, 1):
        label = f"[{i}/{len(pairs)}] {env_id} seed {seed}"
        if args.report_only:
            old = known.get((env_id, seed))
            if old is None:
                continue
            code, minutes, peak = old["exit_code"], old["minutes"], old["tree_peak_gb"]
        else:
            cmd = command(out, env_id, seed, args.eval_every, args.threads, extra)
            print(f"== {label}: {' '.join(cmd[1:])}", flush=True)
            code, minutes, peak = run_measured(cmd, label)
        run = collect(out, env_id, seed, code, minutes, peak)
        runs.append(run)
        print(f"== {label}: exit {code}, {minutes:.1f} min, held-out {_pct(run.before)} -> "
              f"{_pct(run.after)}, tree RSS peak {_gb(peak)} GB", flush=True)
        print(credited_text(out, run))
        # Saved after every run: a long sweep that is stopped keeps what it measured.
        merged = {**known, **{(r.env, r.seed): asdict(r) for r in runs}}
        summary_path.write_text(json.dumps(list(merged.values()), indent=1))
    if not runs:
        print(f"error: no runs in {out}", file=sys.stderr)
        return 1
    print(report(out, runs))
    return 0 if all(r.exit_code == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
