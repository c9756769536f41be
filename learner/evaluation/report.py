"""Writing and comparing evaluation reports: ``report.json``, ``report.html`` with PNG plots.

The HTML page and its plots (in ``plots/`` next to it) need no network to read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

import jinja2

from learner.evaluation.infra import InfraCount, accuracy_line

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"


# -- key figures, deltas, comparison --------------------------------------------------------
def key_figures(report: Mapping[str, Any]) -> dict[str, float | None]:
    """The headline numbers of a report (or of its ``baseline`` section), flat and ordered."""
    out: dict[str, float | None] = {}
    acc = report.get("accuracy", {})
    out["accuracy (greedy)"] = acc.get("greedy")  # None: refused, too many infra failures
    out["infrastructure failures (greedy)"] = acc.get("infra_errors")
    for key, value in report.get("pass_at_k", {}).items():
        if key.startswith("pass@"):
            out[key] = value
    dist = report.get("reward_distribution", {})
    out["reward mean"] = dist.get("total", {}).get("mean")
    out["reward std"] = dist.get("total", {}).get("std")
    for name, comp in dist.get("components", {}).items():
        out[f"reward/{name} mean"] = comp.get("mean")
    episodes = report.get("episodes", {}).get("greedy")
    if episodes:
        out["turns (greedy)"] = episodes.get("turns_mean")
        out["tool use (greedy)"] = episodes.get("tool_use")
    var = report.get("group_variance", {})
    out["zero-variance groups"] = var.get("zero_variance_fraction")
    out["within-group std mean"] = var.get("std", {}).get("mean")
    for name, res in report.get("perturbations", {}).get("results", {}).items():
        out[f"perturb/{name}"] = res.get("score")
    flagged = report.get("flagged", {})
    if flagged:
        out["flagged samples"] = flagged.get("n_flagged")
        high = flagged.get("n_high_reward")
        out["flagged / high-reward"] = flagged.get("n_flagged") / high if high else None
    general = report.get("general", {})
    if general:
        out["general accuracy"] = general.get("accuracy")
        out["general accuracy (per char)"] = general.get("accuracy_per_char")
    return out


def headline(report: Mapping[str, Any]) -> str:
    """One line: ``held-out accuracy 62.5% on 40 tasks (0 infrastructure failures)``, or why
    there is no accuracy (more than 1% of the greedy samples failed for infrastructure)."""
    acc = report.get("accuracy", {})
    n = int(acc.get("n") or 0)
    count = InfraCount(n, int(acc.get("infra_errors") or 0), acc.get("infra_reason"))
    return accuracy_line(acc.get("greedy"), count, tasks=n)


def _num(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def deltas(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, float | None]:
    """``after - before`` for every key figure both reports have."""
    a, b = key_figures(after), key_figures(before)
    out: dict[str, float | None] = {}
    for k, x in a.items():
        y = b.get(k)
        out[k] = x - y if _num(x) and _num(y) else None
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if _num(value):
        return f"{value:.3f}"
    return str(value)


def _fmt_delta(value: Any) -> str:
    return f"{value:+.3f}" if _num(value) else "-"


def compare_table(a: Mapping[str, Any], b: Mapping[str, Any],
                  labels: tuple[str, str] = ("A", "B")) -> str:
    """A plain-text side-by-side table of two reports' key figures, with ``B - A``."""
    fa, fb = key_figures(a), key_figures(b)
    names = list(fa) + [k for k in fb if k not in fa]
    rows = [("metric", labels[0], labels[1], "B - A")]
    for name in names:
        va, vb = fa.get(name), fb.get(name)
        diff = vb - va if _num(va) and _num(vb) else None
        rows.append((name, _fmt(va), _fmt(vb), _fmt_delta(diff)))
    for field in ("model", "env", "pack_version"):
        rows.append((field, str(a.get("metadata", {}).get(field, "-")),
                     str(b.get("metadata", {}).get(field, "-")), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class ReportError(RuntimeError):
    """There is no readable report where one was asked for; the message says where and why."""


def load_report(path: str | Path) -> dict[str, Any]:
    """A report from its output folder or the ``report.json`` file itself."""
    path = Path(path)
    if path.is_dir() or path.suffix != ".json":  # an output folder, made or not
        path = path / REPORT_JSON
    if not path.is_file():
        raise ReportError(f"no report at {path}: write one with python -m learner.eval "
                          f"--output-dir {path.parent}")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path} is not a readable report: {exc}") from exc
    if not isinstance(report, dict):
        raise ReportError(f"{path} is not a readable report: not a JSON object")
    return report


# -- plots ----------------------------------------------------------------------------------
def _bars(ax, hist: Mapping[str, Any], label: str, alpha: float = 0.6) -> None:
    edges, counts = hist["edges"], hist["counts"]
    widths = [e2 - e1 for e1, e2 in zip(edges, edges[1:], strict=False)]
    ax.bar(edges[:-1], counts, width=widths, align="edge", alpha=alpha, label=label,
           edgecolor="black", linewidth=0.5)


def _pyplot() -> Any:
    """matplotlib's pyplot, loaded when a report is drawn: ``--compare`` only reads reports,
    and answers without it (1.4 s of imports)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _plot_rewards(report: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    dist = report["reward_distribution"]
    panels = [("total", dist["total"])] + list(dist["components"].items())
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.8), squeeze=False)
    for ax, (name, section) in zip(axes[0], panels, strict=True):
        _bars(ax, section["histogram"], "policy")
        base = report.get("baseline", {}).get("reward_distribution")
        if base:
            other = base["total"] if name == "total" else base["components"].get(name)
            if other:
                _bars(ax, other["histogram"], "start", alpha=0.4)
            ax.legend(fontsize=7)
        ax.set_title(f"{name} (mean {_fmt(section['mean'])})", fontsize=9)
        ax.set_xlabel("reward")
    axes[0][0].set_ylabel("samples")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_group_std(report: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    var = report["group_variance"]
    fig, ax = plt.subplots(figsize=(4.5, 2.8))
    _bars(ax, var["histogram"], "policy")
    base = report.get("baseline", {}).get("group_variance")
    if base:
        _bars(ax, base["histogram"], "start", alpha=0.4)
        ax.legend(fontsize=7)
    ax.set_title(f"within-group reward std ({_fmt(var['zero_variance_fraction'])} of groups "
                 "zero)", fontsize=9)
    ax.set_xlabel("std")
    ax.set_ylabel("groups")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_perturbations(report: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    results = report["perturbations"]["results"]
    names = list(results)
    base = report.get("baseline", {}).get("perturbations", {}).get("results", {})
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.0))
    xs = range(len(names))
    width = 0.4 if base else 0.7
    ax.bar([x - (width / 2 if base else 0) for x in xs],
           [results[n]["score"] or 0 for n in names], width=width, label="policy")
    if base:
        ax.bar([x + width / 2 for x in xs], [(base.get(n) or {}).get("score") or 0 for n in names],
               width=width, label="start", alpha=0.6)
        ax.legend(fontsize=7)
    ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel(", ".join(report["perturbations"]["check"]))
    ax.set_title("greedy score per prompt variant", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(report: Mapping[str, Any], out_dir: Path) -> dict[str, str]:
    """PNG files under ``out_dir/plots``; returns section -> path relative to ``out_dir``."""
    plots = out_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    made = {}
    jobs = [("rewards", _plot_rewards, "reward_distribution"),
            ("group_std", _plot_group_std, "group_variance"),
            ("perturbations", _plot_perturbations, "perturbations")]
    for name, draw, section in jobs:
        if report.get(section):
            draw(report, plots / f"{name}.png")
            made[name] = f"plots/{name}.png"
    return made


# -- html -----------------------------------------------------------------------------------
_PAGE = jinja2.Template("""<!doctype html>
<html><head><meta charset="utf-8"><title>grpo-gym evaluation: {{ meta.model }}</title>
<style>
body { font-family: sans-serif; max-width: 1100px; margin: 1em auto; color: #222; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ccc;
padding: 2px 8px; text-align: right; } td:first-child, th:first-child { text-align: left; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .5em; max-height: 24em;
overflow: auto; } .pos { color: #070; } .neg { color: #a00; } img { max-width: 100%; }
</style></head><body>
<h1>Evaluation gates</h1>
<table>{% for k, v in meta_rows %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}</table>

<h2>Key figures</h2>
<p>{{ headline }}</p>
<table><tr><th>metric</th><th>policy</th>{% if baseline %}<th>start</th><th>delta</th>{% endif %}</tr>
{% for name, value in figures.items() %}<tr><td>{{ name }}</td><td>{{ fmt(value) }}</td>
{% if baseline %}<td>{{ fmt(baseline.get(name)) }}</td>
<td class="{{ 'pos' if (deltas.get(name) or 0) > 0 else 'neg' if (deltas.get(name) or 0) < 0 else '' }}">
{{ fmt_delta(deltas.get(name)) }}</td>{% endif %}</tr>{% endfor %}</table>

<h2>Reward distribution</h2>
<p>Sampled completions ({{ r.pass_at_k.k }} per task, temperature {{ settings.temperature }}):
total reward and each component.</p>
{% if plots.rewards %}<img src="{{ plots.rewards }}" alt="reward histograms">{% endif %}

<h2>Group variance</h2>
<p>{{ fmt(r.group_variance.zero_variance_fraction) }} of {{ r.group_variance.n_groups }} groups
have zero reward variance (GRPO gets no signal from them):
{{ r.group_variance.zero_variance_groups.all_high }} all rewarded,
{{ r.group_variance.zero_variance_groups.all_zero }} all zero.</p>
{% if plots.group_std %}<img src="{{ plots.group_std }}" alt="group std histogram">{% endif %}

{% if r.perturbations %}<h2>Perturbations</h2>
<p>Greedy score ({{ r.perturbations.check | join(", ") }}, a check that ignores the answer's
format) on the same held-out tasks with the prompt changed.</p>
<table><tr><th>variant</th><th>score</th><th>vs original</th><th>passed</th><th>what changed</th></tr>
{% for name, p in r.perturbations.results.items() %}<tr><td>{{ name }}</td><td>{{ fmt(p.score) }}</td>
<td>{{ fmt_delta(p.delta_vs_original) }}</td><td>{{ fmt(p.passed) }}</td>
<td style="text-align:left">{{ p.description }}</td></tr>{% endfor %}</table>
{% if plots.perturbations %}<img src="{{ plots.perturbations }}" alt="perturbation scores">{% endif %}
{% for name, p in r.perturbations.results.items() %}{% if p.example_prompt %}
<details><summary>example prompt: {{ name }}</summary><pre>{{ p.example_prompt }}</pre></details>
{% endif %}{% endfor %}{% endif %}

<h2>Flagged samples</h2>
<p>{{ r.flagged.n_flagged }} of {{ r.flagged.n_high_reward }} samples with reward &ge;
{{ fmt(r.flagged.min_reward) }} (of {{ r.flagged.n_checked }} checked) look worth reading.
{% for k, v in r.flagged.by_reason.items() %}{{ k }}: {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% for s in r.flagged.samples %}<details><summary>{{ s.task_id }} ({{ s.source }}), reward
{{ fmt(s.reward) }}: {% for f in s.flags %}<b>{{ f.reason }}</b> {{ f.detail }}{% if not loop.last %};
{% endif %}{% endfor %}</summary>
<p>rewards: {{ s.rewards }}</p>{% if s.transcript %}{% for t in s.transcript %}
<p><b>{{ t.role }}</b></p><pre>{{ t.content }}</pre>{% endfor %}{% else %}
<pre>{{ s.prompt }}</pre><pre>{{ s.completion }}</pre>{% endif %}</details>
{% endfor %}

{% if r.general %}<h2>General capability</h2>
<p>{{ r.general.benchmark.name }} ({{ r.general.benchmark.license }}), {{ r.general.n }} items,
{{ r.general.scoring }}: accuracy {{ fmt(r.general.accuracy) }}, per-char
{{ fmt(r.general.accuracy_per_char) }} (chance {{ fmt(r.general.chance) }}).</p>{% endif %}

<h2>Timing</h2>
<table>{% for k, v in r.timing.items() %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}</table>
</body></html>
""", autoescape=True)


def render_html(report: Mapping[str, Any], plots: Mapping[str, str]) -> str:
    meta = report.get("metadata", {})
    meta_rows = [(k, v if isinstance(v, str | int | float) else json.dumps(v))
                 for k, v in meta.items()]
    baseline = key_figures(report["baseline"]) if report.get("baseline") else None
    return _PAGE.render(r=report, meta=meta, meta_rows=meta_rows, figures=key_figures(report),
                        headline=headline(report),
                        baseline=baseline, deltas=report.get("deltas", {}), plots=plots,
                        settings=meta.get("settings", {}),
                        fmt=_fmt, fmt_delta=_fmt_delta)


def write_report(report: Mapping[str, Any], out_dir: str | Path) -> Path:
    """``report.json``, ``report.html`` and ``plots/*.png`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_JSON).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    plots = write_plots(report, out)
    (out / REPORT_HTML).write_text(render_html(report, plots), encoding="utf-8")
    return out / REPORT_JSON
