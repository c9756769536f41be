"""The GPU check: what the learner does on one CUDA GPU, offline, in about 5 minutes; one JSON and
one markdown table, rewritten after every phase (a run cut short keeps what it measured).

    python scripts/gpu_check.py --make-wheels .gpu/wheels    (here, with the package index)
    python scripts/gpu_check.py [--out runs/gpu-check]       (there, on the GPU machine)
    python scripts/gpu_check.py --rehearse                   (on CPU: tiny shapes, lazy device)

The GPU machine needs only Python 3.12 with torch, transformers, accelerate and peft. The rest
travels with the repo in .gpu/ (git-ignored, about 30 MB): ``--make-wheels`` downloads the
project's other dependencies as wheels for that Python and saves the embedded model's tokenizer
(``--tokenizer``, 3.4 MB); the check installs the wheels into .gpu/site when they do not import.
Models are random-init from the shapes in scripts/gpucheck/shapes/ (no weights travel).

Phases, each recorded as ok, failed (one line; its traceback in the JSON) or skipped:

1. ``matmul``: the card's measured bf16 matmul TFLOP/s (8192^2, the MFU ceiling);
2. ``update``: the learner's PolicyUpdate (reference pass, loss passes, AdamW) at Qwen2.5-1.5B's
   shape on a GRPO step's batch (P=16, G=8, prompt 150, completions 100-512 tokens) over
   --micro-batch-tokens x gradient checkpointing: seconds, positions/s, MFU (8N FLOPs a
   position), peak allocated (``torch.cuda.max_memory_allocated``) against the learner's
   memory plan (plan / peak: the goal is 0.85-1.15), and the loss passes' own MFU (6N);
3. ``cli``: ``python -m learner.run`` for a few steps with a Qwen2.5-0.5B-shaped model on
   gpucheck/Brief-v0 (arith prompts rewarded for brevity: a random model's groups have a reward
   spread, so every step updates): the generate, score and train seconds and tokens/s of each
   step, read from its metrics.jsonl (the rehearsal runs MathExact: its updates are skipped);
4. ``learn``: a tiny random-init model learns a synthetic one-word reward through the learner's
   trainer (scripts/gpucheck/synthetic.py): a step's mean reward >= 0.9 within 60 steps;
5. ``vllm``: where vLLM imports, one step with it as the sampling engine: it generates, and after
   the update, and after a change to the tied embedding and head, its log-probs at every
   position are the policy's (within a tenth of how far each change moved them); then, at the update's shape, the engine sized from
   a step of P=64, G=8, prompts of 150 tokens, T=512 (``learner/training/vllm_sizing.py``):
   its decode tokens/s with the 512 rows at once, and the seconds of a sleep, a wake and a
   weight sync from the fp32 policy (scripts/gpucheck/vllm_step.py; docs/gpu.md's step).

Without a CUDA GPU (and without --rehearse) every phase is skipped in one line and it exits 0.
``--rehearse`` runs the same phases at tiny shapes on torch's lazy device (CPU): a device that
refuses CPU tensors, as CUDA does, so misplaced tensors show before GPU time is spent.
Exit status 1 when a phase failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the learner and scripts.gpucheck import

PHASES = ("matmul", "update", "cli", "learn", "vllm")
NO_GPU = "no CUDA GPU visible: skipped"


@dataclass(frozen=True)
class Sizes:
    """The shapes of one kind of run: the GPU's, or the rehearsal's tiny ones."""

    matmul: int
    matmul_runs: int
    update_shape: str
    step: Any  # update_grid.StepShape
    grid: tuple[tuple[int, bool], ...]
    timed_updates: int
    cli_shape: str
    cli: dict[str, int] = field(default_factory=dict)
    learn_steps: int = 60  # the rehearsal's lazy device compiles every new shape: a few only
    warm_up: bool = True  # an update before the timed ones (the rehearsal times its first)
    cli_env: str = "gpucheck/Brief-v0"  # a reward a random model earns: every step updates
    # The vllm phase's step components at update_shape (docs/gpu.md's paper target).
    vllm_step: dict[str, int] = field(default_factory=lambda: {
        "prompts": 64, "group": 8, "prompt_tokens": 150, "tokens": 512})


def sizes(rehearse: str | None) -> Sizes:
    from scripts.gpucheck.update_grid import StepShape

    if rehearse:
        # A 4096-word vocabulary and, on the lazy device, one loss pass: it compiles a graph
        # per micro-batch, and one update took 17 s of CPU so (35 s in 32-token passes, 37 s
        # more at 151,936 words). torch's activation checkpointing has no lazy device.
        grid = ((4096, False),) if rehearse == "lazy" else ((32, False), (32, True))
        return Sizes(256, 3, "tiny:qwen2.5-1.5b", StepShape(2, 2, 8, 4, 12), grid, 1,
                     "tiny:qwen2.5-0.5b", {"steps": 2, "prompts": 2, "group": 2, "tokens": 8},
                     learn_steps=2, warm_up=False,
                     # Updates skipped (no signal): a lazy update took 100-120 s a CLI step.
                     cli_env="grpo/MathExact-v0",
                     vllm_step={"prompts": 2, "group": 2, "prompt_tokens": 12, "tokens": 8})
    grid = tuple((b, c) for b in (16384, 8192, 4096) for c in (False, True))
    return Sizes(8192, 10, "qwen2.5-1.5b", StepShape(), grid, 2, "qwen2.5-0.5b",
                 {"steps": 3, "prompts": 8, "group": 8, "tokens": 256})


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="runs/gpu-check", help="where gpu_check.json and .md go")
    p.add_argument("--rehearse", action="store_true",
                   help="tiny shapes on torch's lazy device (CPU): the phases' code paths")
    p.add_argument("--rehearse-device", choices=("lazy", "cpu"), default="lazy",
                   help="--rehearse on the CPU itself: transformers before 5.19 cannot run a "
                   "model on the lazy device (its rotary embedding asks autocast about it)")
    p.add_argument("--make-wheels", metavar="DIR", type=Path,
                   help="download the wheels the GPU machine lacks into DIR (Python 3.12, "
                   "manylinux x86_64), save the tokenizer to --tokenizer, then exit")
    p.add_argument("--wheels", type=Path, default=ROOT / ".gpu" / "wheels")
    p.add_argument("--site", type=Path, default=ROOT / ".gpu" / "site",
                   help="where the wheels are installed when they do not import")
    p.add_argument("--tokenizer", type=Path, default=ROOT / ".gpu" / "tok",
                   help="the embedded model's tokenizer files (made here when missing)")
    p.add_argument("--work", type=Path, default=ROOT / ".gpu" / "work",
                   help="model folders and runs (GBs at the GPU's shapes: not under --out, "
                   "whose files a device run sends back)")
    p.add_argument("--budget-s", type=float, default=420,
                   help="no update grid point starts past this many seconds (default: 420)")
    p.add_argument("--time-limit-s", type=float, default=480,
                   help="the whole check's limit (default: 480, 8 minutes): a phase that would "
                   "start past it is skipped in one line, the CLI's run ends by it")
    p.add_argument("--phases", default=",".join(PHASES), help="comma-separated subset")
    p.add_argument("--vllm-on-cpu", action="store_true",
                   help="--rehearse: run the vllm phase on CPU (a minute to start the engine)")
    args = p.parse_args(argv)
    for flag in ("budget_s", "time_limit_s"):
        if not 0 < getattr(args, flag) < math.inf:  # also refuses NaN
            p.error(f"--{flag.replace('_', '-')} must be a number of seconds > 0, "
                    f"got {getattr(args, flag)}")
    if not [name for name in args.phases.split(",") if name.strip()]:
        p.error(f"--phases names no phase; known: {', '.join(PHASES)}")
    for flag in ("out", "make_wheels", "work", "site", "wheels", "tokenizer"):
        path = getattr(args, flag)
        if path is not None and Path(path).exists() and not Path(path).is_dir():
            p.error(f"--{flag.replace('_', '-')} {path}: a file is there, not a folder")
    return args


class Report:
    """The phases' records, written as JSON and markdown after each one."""

    def __init__(self, out: Path, meta: dict[str, Any]):
        self.out, self.meta, self.records = out, meta, []
        out.mkdir(parents=True, exist_ok=True)

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self.write()

    def write(self) -> None:
        (self.out / "gpu_check.json").write_text(
            json.dumps({**self.meta, "phases": self.records}, indent=1))
        (self.out / "gpu_check.md").write_text(table(self.meta, self.records))


def run_phase(name: str, body: Callable[[], tuple[str, dict[str, Any]]],
              report: Report) -> None:
    """Run one phase; its status, seconds, one-line detail and figures go to ``report``. A
    phase that raises is failed, with its error's last line: the next phase still runs."""
    print(f"{name}: ...", flush=True)
    start = time.monotonic()
    try:
        detail, figures = body()
        record = {"phase": name, "status": "ok", "detail": detail, "figures": figures}
    except Skip as why:
        record = {"phase": name, "status": "skipped", "detail": str(why), "figures": {}}
    except Exception as exc:  # a phase's failure is a record, not the end of the check
        line = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        record = {"phase": name, "status": "failed", "detail": line[:300], "figures": {},
                  "traceback": traceback.format_exc()[-3000:]}
    record["seconds"] = round(time.monotonic() - start, 1)
    print(f"{name}: {record['status']} ({record['seconds']:.1f} s): {record['detail']}",
          flush=True)
    report.add(record)


class Skip(Exception):
    """A phase that does not apply here (one line says why)."""


def _fmt(value: Any, spec: str = "") -> str:
    return "" if value is None else format(value, spec)


def table(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    lines = [f"GPU check, {meta.get('date', '')}: {meta.get('device', '')}; "
             f"{', '.join(f'{k} {v}' for k, v in meta.get('versions', {}).items())}", "",
             "| phase | status | seconds | detail |", "|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['phase']} | {r['status']} | {r['seconds']:.1f} | "
                     f"{r['detail'].replace('|', '/')} |")
    by_name = {r["phase"]: r.get("figures") or {} for r in records}
    grid = by_name.get("update", {}).get("grid")
    if grid:
        lines += ["", "| micro_batch_tokens | checkpointing | seconds per update | positions/s "
                  "| MFU | peak allocated GB | memory plan GB | plan / peak | loss-pass MFU |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for g in grid:
            if "error" in g:
                lines.append(f"| {g['micro_batch_tokens']} | {'on' if g['checkpointing'] else 'off'}"
                             f" | {g['error']} | | | | | | |")
                continue
            lines.append(f"| {g['micro_batch_tokens']} | {'on' if g['checkpointing'] else 'off'} "
                         f"| {g['seconds']:.2f} | {g['positions_per_s']:.0f} | "
                         f"{_fmt(g.get('mfu'), '.1%')} | {_fmt(g.get('peak_gb'), '.1f')} | "
                         f"{g['plan_gb']:.1f} | {_fmt(g.get('plan_over_peak'), '.2f')} | "
                         f"{_fmt(g.get('loss_mfu'), '.1%')} |")
    steps = by_name.get("cli", {}).get("steps")
    if steps:
        lines += ["", "| step | generate s | score s | train s | generate tokens/s | "
                  "train tokens/s |", "|---|---|---|---|---|---|"]
        for i, s in enumerate(steps, 1):
            train = ("skipped", "skipped") if s.get("skipped") else (
                _fmt(s["time/train_s"], ".2f"), _fmt(s["tokens_per_s/train"], ".0f"))
            lines.append(f"| {i} | {_fmt(s['time/generate_s'], '.2f')} | "
                         f"{_fmt(s['time/score_s'], '.2f')} | {train[0]} | "
                         f"{_fmt(s['tokens_per_s/generate'], '.0f')} | {train[1]} |")
    return "\n".join(lines) + "\n"


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "accelerate", "peft", "vllm"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


class Check:
    """The phases, on one device, at one kind of size."""

    def __init__(self, args: argparse.Namespace, device: Any, report: Report):
        self.args, self.device, self.report = args, device, report
        self.sizes = sizes(args.rehearse and args.rehearse_device)
        self.work = args.work / ("rehearse" if args.rehearse else "gpu")
        self.start = time.monotonic()
        self.peak_tflops: float | None = None

    def model_config(self, name: str, **overrides: Any) -> Any:
        from scripts.gpucheck import assets

        if name.startswith("tiny:"):
            return assets.tiny(name[5:], **overrides)
        return assets.shape(name, **overrides)

    def matmul(self) -> tuple[str, dict[str, Any]]:
        from scripts.gpucheck import device as dev

        figures = dev.matmul_tflops(self.device, self.sizes.matmul, self.sizes.matmul_runs)
        self.peak_tflops = figures["tflops"] if self.device.type == "cuda" else None
        return f"{figures['tflops']:.1f} TFLOP/s bf16 ({figures['size']}^2)", figures

    def update(self) -> tuple[str, dict[str, Any]]:
        from scripts.gpucheck import update_grid

        figures: dict[str, Any] = {"shape": self.sizes.update_shape,
                                   "step": vars(self.sizes.step), "grid": []}

        def partial(rows: list[dict]) -> None:  # the grid so far, in case the run is cut
            figures["grid"] = rows
            self.report.write()

        self.report.records.append({"phase": "update", "status": "running", "seconds": 0.0,
                                    "detail": "", "figures": figures})
        try:
            rows = update_grid.run(
                self.model_config(self.sizes.update_shape,
                                  **({"vocab_size": 4096} if self.args.rehearse else {})),
                self.device,
                grid=list(self.sizes.grid), shape=self.sizes.step, peak_tflops=self.peak_tflops,
                timed=self.sizes.timed_updates, warm_up=self.sizes.warm_up, report=partial,
                time_left=lambda: self.args.budget_s - (time.monotonic() - self.start))
        finally:
            self.report.records.pop()
        figures["grid"] = rows
        done = [r for r in rows if "error" not in r]
        if not done:
            raise RuntimeError(f"no grid point ran: {rows[0].get('error') if rows else ''}")
        best = min(done, key=lambda r: r["seconds"])
        mfu = f", MFU {best['mfu']:.1%}" if "mfu" in best else ""
        if "loss_mfu" in best:
            mfu += f", loss passes {best['loss_mfu']:.1%}"
        if "plan_over_peak" in best:
            mfu += f", plan / peak {best['plan_over_peak']:.2f}"
        return (f"{len(done)}/{len(rows)} points; fastest {best['seconds']:.2f} s at "
                f"{best['micro_batch_tokens']} tokens{mfu}"), figures

    def cli(self) -> tuple[str, dict[str, Any]]:
        from scripts.gpucheck import assets, cli_run

        tokenizer = assets.save_tokenizer(self.args.tokenizer)
        name = self.sizes.cli_shape
        folder = assets.save_model_folder(self.model_config(name), tokenizer,
                                          self.work / name.replace(":", "-"), self.device)
        s = self.sizes.cli
        out = self.work / "cli-run"
        cmd = cli_run.command(folder, out, str(self.device), steps=s["steps"],
                              prompts=s["prompts"], group=s["group"], tokens=s["tokens"],
                              env=self.sizes.cli_env)
        # The rehearsal's lazy device is slow by nature: only its own 240 s apply there.
        left = (float("inf") if self.args.rehearse
                else self.args.time_limit_s - (time.monotonic() - self.start))
        figures = cli_run.run(cmd, out, limit=max(1.0, min(240.0, left)), cwd=ROOT)
        steps = figures["steps"]
        last = steps[-1] if steps else {}
        skipped = sum(bool(x.get("skipped")) for x in steps)
        train = (f"{skipped} of {len(steps)} updates skipped (no reward signal)" if skipped
                 else f"train {_fmt(last.get('time/train_s'), '.2f')} s "
                      f"({_fmt(last.get('tokens_per_s/train'), '.0f')} tokens/s)")
        return (f"{len(steps)} steps on {self.sizes.cli_env}; last: generate "
                f"{_fmt(last.get('time/generate_s'), '.2f')} s "
                f"({_fmt(last.get('tokens_per_s/generate'), '.0f')} tokens/s), score "
                f"{_fmt(last.get('time/score_s'), '.2f')} s; {train}"), figures

    def learn(self) -> tuple[str, dict[str, Any]]:
        from scripts.gpucheck import learning

        steps = self.sizes.learn_steps
        figures = learning.learn(self.work / "say-word", self.device, steps=steps)
        if self.args.rehearse:  # the goal is the GPU's (and tests/test_gpu_check.py's on CPU)
            return (f"{figures['steps']} steps ran on {figures['device']}, reward "
                    f"{figures['rewards'][0]} -> {figures['rewards'][-1]}"), figures
        if not figures["learned"]:
            raise RuntimeError(f"mean reward {figures['rewards'][-1] if figures['rewards'] else None}"
                               f" after {figures['steps']} steps (goal {figures['goal']})")
        return (f"reward {figures['rewards'][0]} -> {figures['rewards'][-1]} in "
                f"{figures['steps']} steps on {figures['device']}"), figures

    def vllm(self) -> tuple[str, dict[str, Any]]:
        import torch

        from scripts.gpucheck import vllm_sync

        why = vllm_sync.available()
        if why:
            raise Skip(why)
        device = self.device
        if device.type != "cuda":
            if not self.args.vllm_on_cpu:
                raise Skip("vLLM has no lazy device (--vllm-on-cpu runs it on CPU)")
            device = torch.device("cpu")
        figures = vllm_sync.check(self.work / "say-word-vllm", device)
        if not figures["synced"]:
            raise RuntimeError(f"a missed sync: after the update the engine's log-probs are "
                               f"{figures['engine_vs_policy_max']} from the policy's, the step "
                               f"moved them {figures['step_moved_max']}; after a change to the "
                               f"tied embedding and head {figures['embedding_synced_max']}, "
                               f"{figures['embedding_stale_max']} before its sync")
        detail = (f"generated {figures['generated_tokens']} tokens; engine vs policy at "
                  f"{figures['positions']} positions: {figures['engine_vs_policy_max']:.4f} "
                  f"after a step that moved {figures['step_moved_max']:.4f}, "
                  f"{figures['embedding_synced_max']:.4f} after a tied embedding/head change "
                  f"that moved {figures['embedding_stale_max']:.4f}")
        # The step's vLLM components at the update phase's shape: decode rate with every row
        # at once, sleep, wake and sync seconds (docs/gpu.md's paper derivation).
        from scripts.gpucheck import assets, vllm_step

        shape = self.sizes.update_shape
        folder = assets.save_model_folder(self.model_config(shape),
                                          assets.save_tokenizer(self.args.tokenizer),
                                          self.work / shape.replace(":", "-"), device)
        self.report.records.append({"phase": "vllm", "status": "running", "seconds": 0.0,
                                    "detail": detail, "figures": figures})
        try:
            parts = figures["components"] = vllm_step.components(folder, device,
                                                                 **self.sizes.vllm_step)
        finally:
            self.report.records.pop()
        return (f"{detail}; at {shape}: {parts['rows']} rows decode "
                f"{parts['decode_tokens_per_s']} tokens/s, sync {parts['sync_s']} s, sleep "
                f"{parts['sleep_s']} s, wake {parts['wake_s']} s"), figures


def make_wheels(args: argparse.Namespace) -> int:
    from scripts.gpucheck import assets

    done = assets.make_wheels(args.make_wheels)
    tokenizer = assets.save_tokenizer(args.tokenizer)
    size = sum(f.stat().st_size for f in tokenizer.iterdir()) / 1e6
    print(f"{done['wheels']} wheels, {done['mb']} MB in {args.make_wheels}; tokenizer "
          f"{size:.1f} MB in {tokenizer}")
    if done["mb"] > assets.WHEELS_MB:
        print(f"error: the wheels are {done['mb']} MB, over the {assets.WHEELS_MB} MB they may "
              f"take: add what the GPU machine has to assets.PRESENT", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.make_wheels:
        return make_wheels(args)
    chosen = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PHASES))
    if unknown:
        print(f"error: unknown phases {unknown}; known: {', '.join(PHASES)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    from scripts.gpucheck import assets
    from scripts.gpucheck import device as dev

    device = dev.choose(args.rehearse and args.rehearse_device)
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "rehearse": args.rehearse, "versions": versions()}
    report = Report(out, meta)
    if device is None:
        meta["device"] = "none"
        for name in chosen:
            print(f"{name}: {NO_GPU}", flush=True)
            report.records.append({"phase": name, "status": "skipped", "seconds": 0.0,
                                   "detail": NO_GPU, "figures": {}})
        report.write()
        print(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
        return 0
    import torch

    meta["device"] = (torch.cuda.get_device_name(device) if device.type == "cuda"
                      else f"{device} (rehearsal on CPU)")
    meta["wheels"] = assets.use_wheels(args.wheels, args.site)
    print(f"device: {meta['device']}; {meta['wheels']}", flush=True)
    check = Check(args, device, report)
    for name in chosen:
        spent = time.monotonic() - check.start
        if spent > args.time_limit_s and not args.rehearse:
            why = f"the check's {args.time_limit_s:.0f} s were spent ({spent:.0f} s): skipped"
            print(f"{name}: {why}", flush=True)
            report.add({"phase": name, "status": "skipped", "seconds": 0.0, "detail": why,
                        "figures": {}})
            continue
        run_phase(name, getattr(check, name), report)
    print(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    return 1 if any(r["status"] == "failed" for r in report.records) else 0


if __name__ == "__main__":
    sys.exit(main())
