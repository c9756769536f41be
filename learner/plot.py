"""``python -m learner.plot DIR``: PNG training curves from ``DIR/metrics.jsonl``."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from learner.training.run_log import read_metrics  # noqa: E402

PANELS = {
    "reward": ["reward/mean"],
    "reward_components": None,  # every reward/<component>
    "kl": ["kl"],
    "entropy": ["entropy"],
    "zero_std_fraction": ["group/frac_zero_std"],
    "completion_length": ["completion/len_mean", "completion/policy_len_mean"],
    # Multi-turn envs: turns per episode, tool calls, the share of episodes using the tool,
    # the share of calls that failed, seconds in the tool per episode.
    "tool_use": ["turns/mean", "tool/calls_mean", "tool/use_frac", "tool/error_frac"],
    "tool_time": ["tool/s"],
    "heldout_accuracy": None,  # every eval/accuracy, eval/pass@k
    "perturbations": None,  # every eval/perturb/<variant>
    "reward_hack_flags": None,  # flags/credited_frac and every flags/<reason>
    "shaping_only": ["samples/shaping_only_frac", "accuracy"],  # paid without the skill
    # Seconds to grade one sample, and the samples whose grading hit a time limit: a slow
    # verifier shows here before it stalls a run.
    "grading_time": ["time/grade_p50_s", "time/grade_p99_s", "time/grade_max_s"],
    "grading_timeouts": ["samples/grade_timeouts"],
    # Samples whose grading failed for infrastructure (dropped from the update; past
    # --max-infra-error-rate the run stops).
    "infra_errors": ["samples/infra_errors"],
    # The run's peak memory so far (GB): resident, and allocated on a CUDA GPU.
    "memory": ["memory/peak_rss_gb", "memory/cuda_peak_allocated_gb"],
    # --sampler: the share of each step's groups per curriculum key (level, family, subject),
    # each key's pass rate as the sampler estimates it, and the groups with reward spread.
    "curriculum_mix": None,  # every mix/<key>
    "curriculum_pass_rate": None,  # every pass_rate/<key>
    "signal_groups": ["signal/per_episode"],
    "signal_per_1k_tokens": ["signal/per_1k_tokens"],
}


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """The logged points of ``key``; a step that logged it as null (a skipped update) is a NaN,
    so the line has a gap there instead of bridging it."""
    pts = [(r["step"], r[key] if isinstance(r[key], int | float) else math.nan)
           for r in rows if key in r and (r[key] is None or isinstance(r[key], int | float))]
    if all(math.isnan(y) for _, y in pts):
        return [], []
    return [p[0] for p in pts], [p[1] for p in pts]


def panel_series(rows: list[dict], panel: str, key: str) -> tuple[list[int], list[float]]:
    """The points of ``key`` in ``panel``. A flag reason is logged only on steps where it
    fired, so on a step that credited samples without it (``flags/credited_frac`` logged) its
    share is 0, and its line starts with the others; a step that credited nothing stays a gap."""
    if panel == "reward_hack_flags" and key != "flags/credited_frac":
        rows = [r if key in r or "flags/credited_frac" not in r else {**r, key: 0.0}
                for r in rows]
    return _series(rows, key)


def plot(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write one PNG per panel; returns the files written (panels without data are skipped)."""
    rows = read_metrics(run_dir)
    out = Path(out_dir or Path(run_dir) / "plots")
    out.mkdir(parents=True, exist_ok=True)
    keys = {k for r in rows for k in r}
    written = []
    for name, listed in PANELS.items():
        wanted = listed or []  # None: the panel's keys are found in the rows below
        if name == "reward_components":
            wanted = sorted(k for k in keys if k.startswith("reward/") and k not in
                            ("reward/mean", "reward/std"))
        elif name == "heldout_accuracy":
            wanted = sorted(k for k in keys if k == "eval/accuracy" or k.startswith("eval/pass@"))
        elif name == "perturbations":
            wanted = sorted(k for k in keys if k.startswith("eval/perturb/"))
        elif name in ("curriculum_mix", "curriculum_pass_rate"):
            prefix = "mix/" if name == "curriculum_mix" else "pass_rate/"
            wanted = sorted(k for k in keys if k.startswith(prefix))
        elif name == "reward_hack_flags":
            wanted = sorted(k for k in keys if k.startswith("flags/") and k != "flags/credited")
        series = {k: panel_series(rows, name, k) for k in wanted}
        series = {k: v for k, v in series.items() if v[0]}
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, (x, y) in series.items():
            ax.plot(x, y, marker="o" if len(x) < 30 else None, label=key)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.set_title(name.replace("_", " "))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learner.plot", description=__doc__)
    parser.add_argument("run_dir", help="a learner.run --output-dir")
    parser.add_argument("--out", help="where to write the PNGs (default: RUN_DIR/plots)")
    args = parser.parse_args(argv)
    if not (Path(args.run_dir) / "metrics.jsonl").is_file():
        print(f"error: no metrics.jsonl in {args.run_dir}", file=sys.stderr)
        return 1
    for path in plot(args.run_dir, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
