"""Uniform against curriculum task sampling at equal tokens (``--sampler``), 3 seeds each.

    python benchmarks/curriculum.py --out /tmp/curriculum-bench

On arith levels 1-6, pyfunc (all levels) and JSON extraction (``extract``: 4 levels x 5
families, 20 keys) with the embedded model on CPU, each run trains with the pack's CPU recipe
settings until its sampled tokens reach the budget (``--arith-tokens``, ``--pyfunc-tokens``,
``--json-tokens``: equal tokens, not equal steps, since the curriculum's point is to spend
tokens where groups have reward spread), then evaluates greedily on ``--per-level`` held-out
tasks of each level (``--json-per-key`` of each JSON level and family; the table shows each
level's and each family's figure). The starting model's held-out accuracy ("before") is the same for every
run (greedy decoding, same tasks), so it is measured once per pack.

Each run is a child process (``os.wait4`` gives its own peak resident memory); its figures go
to ``OUT/results.jsonl`` as it ends, so a cut-short benchmark still reports the runs done.
``--summarize OUT`` prints the table (markdown) and writes ``OUT/curriculum.png`` from them.

Reported per pack and sampler (median over seeds, with the seeds' values): signal groups
(groups whose rewards differ) per 1,000 sampled tokens and per episode, held-out accuracy per
level and overall after (before for reference), steps, minutes and peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PACKS: dict[str, dict[str, Any]] = {
    # The CPU recipes' settings (envs/domains/math_exact.toml, code_tests.toml), over the
    # whole pack instead of one level.
    "arith": dict(env="grpo/MathExact-v0",
                  env_kwargs={"pack": "arith", "require_boxed": True,
                              "reward_weights": {"format": 0}},
                  max_new_tokens=32, recipe_level=1),
    "pyfunc": dict(env="grpo/CodeTests-v0", env_kwargs={"pack": "pyfunc"}, max_new_tokens=96,
                   recipe_level=3),
    # envs/domains/json_schema.toml: an example record in the prompt, only content pays, 64
    # tokens; its keys are level and family (L1-person ... L4-address, 20 in all).
    "json": dict(env="grpo/JsonSchema-v0",
                 env_kwargs={"pack": "extract", "example": True,
                             "reward_weights": {"valid": 0, "format": 0}},
                 max_new_tokens=64, recipe_level=1, settings={"micro_batch_tokens": 256}),
}
# "recipe" is the CPU recipe's hand-picked level (the seeded stream of that level alone): the
# arm the whole-pack samplers must beat for the recipes to switch to them.
ARMS = ("uniform", "curriculum", "recipe")
COMMON = dict(prompts_per_step=2, group_size=8, learning_rate=2e-5, temperature=0.7, beta=0.0,
              eval=False, eval_perturbations=False, progress=False, samples_every=0,
              plot_every=0)


def config(pack: str, sampler: str, seed: int, out: Path) -> Any:
    from learner.config import Config

    spec = PACKS[pack]
    env_kwargs = dict(spec["env_kwargs"])
    if sampler == "recipe":
        env_kwargs["level"] = spec["recipe_level"]
    c = Config(**COMMON, **spec.get("settings", {}), env=spec["env"], env_kwargs=env_kwargs,
               max_new_tokens=spec["max_new_tokens"],
               sampler="sequential" if sampler == "recipe" else sampler, seed=seed, steps=10_000,
               output_dir=str(out / f"{pack}-{sampler}-{seed}"))
    c.validate()
    return c


def heldout_by_key(env: Any, per_key: int) -> list[Any]:
    """The first ``per_key`` test tasks of each curriculum key (the test split lists them
    level by level, so its first tasks would all be level 1)."""
    taken: dict[str, int] = {}
    tasks = []
    for i in range(env.pack.size("test")):
        task = env.pack.task_at("test", i)
        key = env.curriculum_key(task)
        if taken.get(key, 0) < per_key:
            taken[key] = taken.get(key, 0) + 1
            tasks.append(task)
    return tasks


def accuracy_by_key(env: Any, model: Any, tokenizer: Any, tasks: list[Any],
                    max_new_tokens: int) -> dict[str, float]:
    from learner.evaluation.heldout import evaluate

    result = evaluate(model, tokenizer, env, tasks, max_new_tokens=max_new_tokens, k=1,
                      batch_size=64)
    hits: dict[str, list[int]] = {}
    keys = {env.curriculum_key(task) for task in tasks}
    for task, rec in zip(tasks, result.records, strict=True):
        hits.setdefault(env.curriculum_key(task), []).append(int(bool(rec["passed"])))
    # Keys of two parts (JSON's L2-person): each level's and each family's figure as well.
    for key, v in list(hits.items()):
        if "-" in key:
            for part in key.split("-", 1):
                hits.setdefault(part, []).extend(v)
    out = {k: sum(v) / len(v) for k, v in sorted(hits.items())}
    whole = [v for k, v in hits.items() if k in keys]
    out["overall"] = sum(map(sum, whole)) / sum(map(len, whole))
    return out


def one_run(pack: str, sampler: str, seed: int, out: Path, tokens: int, per_key: int) -> dict:
    """Train until ``tokens`` sampled tokens, then evaluate on every level's held-out tasks
    (none where ``per_key`` is 0: signal figures only); ``sampler`` "before": evaluate the
    starting model only."""
    import gymnasium as gym

    from learner.training.trainer import GRPOTrainer

    t0 = time.perf_counter()
    c = config(pack, "sequential" if sampler == "before" else sampler, seed, out)
    trainer = GRPOTrainer(c)
    # The recipe arm trains on one level; it is evaluated on the whole pack like the others.
    whole = (gym.make(PACKS[pack]["env"], **PACKS[pack]["env_kwargs"]).unwrapped
             if sampler == "recipe" else trainer.env)
    tasks = heldout_by_key(whole, per_key) if per_key else []
    record: dict[str, Any] = {"pack": pack, "sampler": sampler, "seed": seed}
    if sampler == "before":
        if not tasks:
            raise SystemExit("no held-out tasks to evaluate the starting model on")
        record["accuracy"] = accuracy_by_key(trainer.env, trainer.policy, trainer.tokenizer,
                                             tasks, c.max_new_tokens)
        record["minutes"] = (time.perf_counter() - t0) / 60
        return record
    spent, signal, episodes, steps, mixes, credited = 0.0, 0, 0, 0, [], []
    partial, unpaid = [], []  # paid without passing (JSON's content share), and paid nothing
    observed: dict[str, list[float]] = {}  # key -> [passes, episodes, tokens], undecayed
    while spent < tokens:
        step = trainer.train_step()
        m = step.metrics
        spent += m["signal/tokens"]
        signal += int(m["signal/groups"])
        episodes += len(step.samples.scores.rewards)
        steps += 1
        mixes.append({k.removeprefix("mix/"): v for k, v in m.items() if k.startswith("mix/")})
        g, lengths = step.samples.group_size, step.samples.rollout.policy_lengths.tolist()
        for i, task in enumerate(step.samples.tasks):
            acc = observed.setdefault(trainer.env.curriculum_key(task), [0.0, 0.0, 0.0])
            acc[0] += sum(bool(p) for p in step.samples.scores.passed[i * g:(i + 1) * g])
            acc[1] += g
            acc[2] += sum(lengths[i * g:(i + 1) * g])
        for group in step.sample_groups(None):
            for text, passed, reward in zip(group["completions"], group["passed"],
                                            group["reward"], strict=True):
                row = {"step": steps, "task_id": group["task_id"], "completion": text,
                       "reward": reward}
                if passed and len(credited) < 12:
                    credited.append(row)
                elif not passed and reward > 0 and len(partial) < 12:
                    partial.append(row)
                elif reward <= 0 and len(unpaid) < 3:
                    unpaid.append(row)
        print(f"{pack} {sampler} seed {seed}: step {steps}, {spent:.0f}/{tokens} tokens, "
              f"{signal} signal groups", flush=True)
    train_minutes = (time.perf_counter() - t0) / 60
    trainer.policy.eval()
    record.update(
        tokens=spent, steps=steps, episodes=episodes, signal_groups=signal,
        signal_per_1k_tokens=1000 * signal / spent, signal_per_episode=signal / episodes,
        mix=mixes, pass_rates=trainer.sampler.pass_rates(), credited=credited,
        partial=partial, unpaid=unpaid,
        costs={k: st.cost for k, st in trainer.sampler.stats.items()}, observed=observed,
        accuracy=accuracy_by_key(whole, trainer.policy, trainer.tokenizer, tasks,
                                 c.max_new_tokens) if tasks else {},
        train_minutes=train_minutes, minutes=(time.perf_counter() - t0) / 60)
    if whole is not trainer.env:
        whole.close()
    trainer.close()
    return record


def pooled_observed(rows: list[dict], pack: str) -> dict[str, list[float]]:
    """Each key's passes, episodes and tokens over every run of ``pack`` (both samplers)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["pack"] == pack:
            for key, (passes, episodes, tokens) in r.get("observed", {}).items():
                acc = out.setdefault(key, [0.0, 0.0, 0.0])
                acc[0], acc[1], acc[2] = acc[0] + passes, acc[1] + episodes, acc[2] + tokens
    return out


def replay(pack: str, observed: dict[str, list[float]], sampler: str, seed: int,
           tokens: float, prompts: int = COMMON["prompts_per_step"],
           group: int = COMMON["group_size"]) -> dict[str, float]:
    """The real sampler over the real pack, with each episode's outcome drawn from its key's
    measured pass rate and its cost that key's measured mean tokens (no model): the signal
    groups each sampler finds at a token budget the CPU runs cannot reach. A key without
    measurements gets the others' pooled rate and cost."""
    import gymnasium as gym
    import numpy as np

    import envs  # noqa: F401 - registers the grpo/* envs
    from learner.training.task_sampler import build_sampler

    spec = PACKS[pack]
    env = gym.make(spec["env"], **spec["env_kwargs"]).unwrapped
    total = [sum(v[i] for v in observed.values()) for i in range(3)]
    rate = {k: v[0] / v[1] for k, v in observed.items() if v[1]}
    cost = {k: v[2] / v[1] for k, v in observed.items() if v[1]}
    s = build_sampler(sampler, env, seed, group)
    rng = np.random.default_rng([seed, 2])
    spent, signal, episodes = 0.0, 0, 0
    while spent < tokens:
        ids, rewards, costs = [], [], []
        for task in s.take(prompts):
            key = env.curriculum_key(task)
            p, c = rate.get(key, total[0] / total[1]), cost.get(key, total[2] / total[1])
            passed = rng.random(group) < p
            signal += bool(0 < passed.sum() < group)
            ids += [task.id] * group
            rewards += passed.astype(float).tolist()
            costs += [c] * group
        s.update(ids, rewards, costs)
        spent += sum(costs)
        episodes += len(ids)
    return {"signal_per_1k_tokens": 1000 * signal / spent, "signal_per_episode": signal / episodes}


def replay_table(out: Path, tokens: float, seeds: int) -> str:
    rows = read_results(out)
    lines = [f"\nReplay at {tokens:.0f} tokens per run, seeds 0-{seeds - 1} (median, min-max):\n",
             "| pack | measured pass rate per key (episodes) | uniform signal/1k tokens | "
             "curriculum signal/1k tokens | ratio |", "|---|---|---|---|---|"]
    for pack in PACKS:
        observed = pooled_observed(rows, pack)
        if not observed:
            continue
        got = {s: [replay(pack, observed, s, seed, tokens)["signal_per_1k_tokens"]
                   for seed in range(seeds)] for s in ("uniform", "curriculum")}
        med = {s: statistics.median(v) for s, v in got.items()}
        rates = ", ".join(f"{k} {v[0] / v[1]:.2f} ({v[1]:.0f})" for k, v in sorted(observed.items()))
        cells = [f"{med[s]:.3f} ({min(got[s]):.3f}-{max(got[s]):.3f})" for s in got]
        ratio = med["curriculum"] / med["uniform"] if med["uniform"] else float("nan")
        lines.append(f"| {pack} | {rates} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    return "\n".join(lines)


def child(args: argparse.Namespace) -> int:
    pack, sampler, seed = args.one
    out = Path(args.out)
    tokens = getattr(args, f"{pack}_tokens")
    per_key = args.json_per_key if pack == "json" else args.per_level
    record = one_run(pack, sampler, int(seed), out / "runs", tokens, per_key)
    (out / f"{pack}-{sampler}-{seed}.json").write_text(json.dumps(record))
    return 0


def run_child(args: argparse.Namespace, pack: str, sampler: str, seed: int) -> None:
    out = Path(args.out)
    if any((r["pack"], r["sampler"], r["seed"]) == (pack, sampler, seed)
           for r in read_results(out)):
        print(f"{pack} {sampler} seed {seed}: done before (results.jsonl)", flush=True)
        return  # a benchmark started again goes on where it stopped
    cmd = [sys.executable, __file__, "--one", pack, sampler, str(seed), "--out", str(out),
           "--arith-tokens", str(args.arith_tokens), "--pyfunc-tokens", str(args.pyfunc_tokens),
           "--json-tokens", str(args.json_tokens), "--per-level", str(args.per_level),
           "--json-per-key", str(args.json_per_key)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    minutes = (time.perf_counter() - t0) / 60
    path = out / f"{pack}-{sampler}-{seed}.json"
    if os.waitstatus_to_exitcode(status) != 0 or not path.is_file():
        print(f"{pack} {sampler} seed {seed}: the run failed (exit "
              f"{os.waitstatus_to_exitcode(status)})", flush=True)
        return
    record = json.loads(path.read_text())
    record.update(wall_minutes=minutes, peak_rss_gb=usage.ru_maxrss / 1e6)  # KB on Linux
    with (out / "results.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"{pack} {sampler} seed {seed}: {minutes:.1f} min, "
          f"{usage.ru_maxrss / 1e6:.2f} GB peak", flush=True)


def read_results(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _fmt(values: list[float], pct: bool = False, digits: int = 2) -> str:
    if not values:
        return "-"
    f = (lambda v: f"{100 * v:.0f}%") if pct else (lambda v: f"{v:.{digits}f}")
    return f"{f(statistics.median(values))} ({', '.join(f(v) for v in values)})"


def shown(keys: set[str]) -> list[str]:
    """The keys a table or plot shows, without "overall": JSON's levels and families rather
    than its 20 level-family pairs."""
    keys = keys - {"overall"}
    return sorted(k for k in keys if "-" not in k) if any("-" in k for k in keys) else sorted(keys)


def summarize(out: Path) -> str:
    rows = read_results(out)
    lines = []
    for pack in PACKS:
        before = next((r for r in rows if r["pack"] == pack and r["sampler"] == "before"), None)
        runs = {s: sorted((r for r in rows if r["pack"] == pack and r["sampler"] == s),
                          key=lambda r: r["seed"]) for s in ARMS}
        if not any(runs.values()):
            continue
        keys = shown({k for rs in runs.values() for r in rs for k in r["accuracy"]})
        lines.append(f"\n**{pack}** (median of seeds, the seeds' values in brackets; before: "
                     f"the starting model, once)\n")
        head = ["", "before"] + [s for s in runs if runs[s]]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))

        def row(name: str, get: Any, pct: bool = False, digits: int = 2, show_before: Any = None,
                head: list[str] = head, runs: dict = runs) -> None:
            cells = [name, "-" if show_before is None else show_before]
            cells += [_fmt([v for r in runs[s] if (v := get(r)) is not None], pct, digits)
                      for s in head[2:]]
            lines.append("| " + " | ".join(cells) + " |")

        row("seeds", lambda r: r["seed"], digits=0)
        row("tokens sampled", lambda r: r["tokens"], digits=0)
        row("steps", lambda r: r["steps"], digits=0)
        row("signal groups per 1k tokens", lambda r: r["signal_per_1k_tokens"], digits=3)
        row("signal groups per episode", lambda r: r["signal_per_episode"], digits=4)
        for key in [*keys, "overall"]:
            b = before["accuracy"].get(key) if before else None
            # A run evaluated on no held-out task (``--json-per-key 0``) has no figure here.
            row(f"held-out {key}",
                lambda r, key=key: r["accuracy"].get(key, 0.0) if r["accuracy"] else None,
                pct=True,
                show_before=None if b is None else f"{100 * b:.0f}%")
        row("minutes (wall)", lambda r: r["wall_minutes"], digits=1)
        row("peak resident GB", lambda r: r["peak_rss_gb"], digits=2)
        for s, rs in runs.items():
            if rs:
                shares: dict[str, float] = {}
                for r in rs:
                    for mix in r["mix"]:
                        for k, v in mix.items():
                            k = k.split("-")[0]  # JSON's L2-people: its level's share
                            shares[k] = shares.get(k, 0.0) + v / len(r["mix"]) / len(rs)
                lines.append(f"\n{s}: mean share of groups per key: "
                             + ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(shares.items())))
    text = "\n".join(lines)
    plot(rows, out / "curriculum.png")
    return text


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    packs = [p for p in PACKS if any(r["pack"] == p and r["sampler"] != "before" for r in rows)]
    if not packs:
        return
    fig, axes = plt.subplots(2, len(packs), figsize=(5.5 * len(packs), 6.5), squeeze=False)
    for j, pack in enumerate(packs):
        arms = (("uniform", "tab:blue", -0.27), ("curriculum", "tab:orange", 0.0),
                ("recipe", "tab:green", 0.27))
        for x, (s, color, dx) in enumerate(arms):
            rs = [r for r in rows if r["pack"] == pack and r["sampler"] == s]
            if not rs:
                continue
            ax = axes[0][j]
            ax.scatter([x] * len(rs), [r["signal_per_1k_tokens"] for r in rs], color=color,
                       label=s)
            evaluated = [r for r in rs if r["accuracy"]]  # --json-per-key 0: none
            if not evaluated:
                continue
            keys = shown({k for r in evaluated for k in r["accuracy"]}) + ["overall"]
            med = [statistics.median(r["accuracy"].get(k, 0.0) for r in evaluated)
                   for k in keys]
            axes[1][j].bar([i + dx for i in range(len(keys))], med, width=0.27, color=color,
                           label=s)
            axes[1][j].set_xticks(range(len(keys)), keys, rotation=40 if len(keys) > 7 else 0)
        before = next((r for r in rows if r["pack"] == pack and r["sampler"] == "before"), None)
        if before:
            keys = shown(set(before["accuracy"])) + ["overall"]
            axes[1][j].scatter(range(len(keys)), [before["accuracy"][k] for k in keys],
                               color="black", marker="_", s=200, label="before", zorder=3)
        axes[0][j].set_title(f"{pack}: signal groups per 1k tokens (each seed)")
        axes[0][j].set_xticks(range(len(arms)), [a[0] for a in arms])
        axes[1][j].set_title(f"{pack}: held-out accuracy after (median of seeds)")
        axes[1][j].set_ylim(0, 1.05)  # a panel of 0% bars keeps the others' scale
        axes[1][j].legend(fontsize=8)
        for ax in axes[:, j]:
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="/tmp/curriculum-bench")
    p.add_argument("--packs", nargs="+", default=list(PACKS), choices=list(PACKS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS),
                   help="uniform and curriculum over the whole pack; recipe: the CPU recipe's "
                   "hand-picked level")
    p.add_argument("--arith-tokens", type=int, default=8000,
                   help="sampled tokens each arith run trains on")
    p.add_argument("--pyfunc-tokens", type=int, default=16000,
                   help="sampled tokens each pyfunc run trains on")
    p.add_argument("--json-tokens", type=int, default=10000,
                   help="sampled tokens each JSON (extract) run trains on")
    p.add_argument("--per-level", type=int, default=8, help="held-out tasks per level")
    p.add_argument("--json-per-key", type=int, default=4,
                   help="held-out JSON tasks per level and family (20 keys); 0: no held-out "
                   "evaluation, signal figures only")
    p.add_argument("--one", nargs=3, metavar=("PACK", "SAMPLER", "SEED"), help=argparse.SUPPRESS)
    p.add_argument("--summarize", action="store_true",
                   help="only print the table and write the plot from OUT/results.jsonl")
    p.add_argument("--replay-tokens", type=float, default=0,
                   help="also replay both samplers over this many tokens per run, each "
                   "episode's outcome drawn from its key's pass rate measured in the runs")
    p.add_argument("--replay-seeds", type=int, default=20)
    args = p.parse_args(argv)
    if args.one:
        return child(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.summarize:
        print(f"command: python benchmarks/curriculum.py {' '.join(sys.argv[1:])}", flush=True)
        # Seed by seed, both packs: a benchmark cut short still has paired comparisons. The
        # starting model's accuracy last: it is one figure per pack.
        for seed in args.seeds:
            for pack in args.packs:
                for sampler in args.arms:
                    run_child(args, pack, sampler, seed)
        for pack in args.packs:
            if (args.json_per_key if pack == "json" else args.per_level) > 0:
                run_child(args, pack, "before", 0)
    print(summarize(out))
    if args.replay_tokens:
        print(replay_table(out, args.replay_tokens, args.replay_seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
