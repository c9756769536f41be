"""``python -m learner.eval``: evaluation gates for a policy, before and after training.

    python -m learner.eval --env ENV_ID [--env-kwargs JSON] [--model PATH_OR_HF_ID | --run DIR]
        --limit N --group-size K --max-new-tokens T --output-dir OUT
    python -m learner.eval --compare OUT_A OUT_B

Without ``--model`` the embedded default model is evaluated. With ``--run DIR`` the latest
checkpoint of that training run is evaluated next to the model the run started from, and the
report carries both and their deltas. Output: ``OUT/report.json``, ``OUT/report.html`` (plots in
``OUT/plots``) and every graded completion in ``OUT/samples.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from envs.base import TaskEnv
from learner.choices import CPU_MATMULS
from learner.config import Config, ConfigError, parse_json_object, ray_address_problems
from learner.evaluation.gates import GateSettings, run_gates
from learner.evaluation.general import ARC_EASY
from learner.evaluation.heldout import heldout_tasks
from learner.evaluation.report import compare_table, deltas, load_report, write_report
from learner.evaluation.run_dir import RunDirError, load_run_policy, run_config, run_env
from learner.launch import SetupError, make_env, ray_scorer
from learner.model import DEFAULT_MODEL, ModelLoadError, load_model, load_tokenizer
from learner.sampling.kernels import onednn_linear


# -- the report -----------------------------------------------------------------------------
def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def metadata(args: argparse.Namespace, env: TaskEnv, model_name: str, n_tasks: int,
             settings: GateSettings) -> dict[str, Any]:
    pack = env.pack
    return {
        "model": model_name,
        "env": env.env_id or args.env,
        "env_kwargs": args.env_kwargs,
        "pack": pack.name,
        "pack_version": pack.pack_version,
        "pack_license": pack.manifest.license,
        "split": "test",
        "n_tasks": n_tasks,
        "seed": settings.seed,
        "settings": settings.as_dict(),
        "reward_weights": env.reward_weights,
        "general_benchmark": ARC_EASY if settings.general_limit else None,
        "versions": {name: _version(name) for name in ("grpo-gym", "torch", "transformers")}
        | {"python": platform.python_version()},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _write_samples(path: Path, samples: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")


def _evaluate(model: PreTrainedModel, tokenizer, env: TaskEnv, tasks, settings: GateSettings,
              label: str, scorer=None, cpu_matmul: str = "onednn") -> dict[str, Any]:
    print(f"evaluating {label} on {len(tasks)} held-out tasks ...", file=sys.stderr)
    onednn_linear.route_on_cpu(model, cpu_matmul)
    start = time.perf_counter()
    report = run_gates(model, tokenizer, env, tasks, settings,
                       log=lambda line: print(line, file=sys.stderr), scorer=scorer)
    report["timing"]["total_s"] = round(time.perf_counter() - start, 3)
    return report


def evaluate_command(args: argparse.Namespace) -> Path:
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    start_model: str | None = args.model
    if args.run:
        config = run_config(args.run)
        start_model = config.get("model")
        if config.get("max_turns"):  # --max-turns of the run is an env option too
            config["env_kwargs"] = {**(config.get("env_kwargs") or {}),
                                    "max_turns": config["max_turns"]}
        if args.max_episode_tokens is None:
            args.max_episode_tokens = config.get("max_episode_tokens", 0)
        if args.tool_role is None:
            args.tool_role = config.get("tool_role", "auto")
        args.env, args.env_kwargs, notes = run_env(config, args.env, args.env_kwargs)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    if args.env is None:
        raise SetupError("give --env (or --run DIR to take it from the run's config)")
    env_config = Config(env=args.env, env_kwargs=args.env_kwargs, max_turns=args.max_turns)
    try:
        env_config.validate()
    except ConfigError as exc:
        raise SetupError(str(exc)) from exc
    env = make_env(env_config)
    scorer = ray_scorer(env, args.ray_address)
    try:
        return _evaluate_all(args, env, scorer, start_model)
    finally:
        if scorer is not None:
            scorer.close()


def _evaluate_all(args: argparse.Namespace, env: TaskEnv, scorer, start_model: str | None
                  ) -> Path:
    tasks = heldout_tasks(env, args.limit)
    settings = GateSettings(
        group_size=args.group_size, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, top_p=args.top_p, seed=args.seed,
        batch_size=args.batch_size, workers=args.workers, general_limit=args.general_limit,
        flag_min_reward=args.flag_min_reward, perturbations=not args.no_perturbations,
        max_episode_tokens=args.max_episode_tokens or 0, tool_role=args.tool_role or "auto")
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(start_model)
    start_name = start_model or DEFAULT_MODEL
    if args.run:
        policy, policy_name = load_run_policy(args.run)
    else:
        policy, policy_name = load_model(start_model), start_name
    report = _evaluate(policy, tokenizer, env, tasks, settings, policy_name, scorer,
                       args.cpu_matmul)
    _write_samples(out / "samples.jsonl", report.pop("samples"))
    report = {"metadata": metadata(args, env, policy_name, len(tasks), settings), **report}
    if args.run:
        report["metadata"]["run"] = str(args.run)
        report["metadata"]["start_model"] = start_name
        del policy  # two 135M+ models fit, but there is no need to hold both
        baseline = _evaluate(load_model(start_model), tokenizer, env, tasks, settings,
                             f"the starting model {start_name}", scorer, args.cpu_matmul)
        _write_samples(out / "samples_start.jsonl", baseline.pop("samples"))
        report["baseline"] = {"model": start_name, **baseline}
        report["deltas"] = deltas(report, baseline)
    return write_report(report, out)


# -- command line ---------------------------------------------------------------------------
def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m learner.eval",
        description="Evaluation gates: held-out accuracy, pass@k, reward and group-variance "
                    "distributions, prompt perturbations, flagged samples, a general check.")
    p.add_argument("--compare", nargs=2, metavar=("OUT_A", "OUT_B"),
                   help="print the key figures of two reports side by side, then exit")
    p.add_argument("--env", help="gymnasium id of a grpo/* env (default with --run: the run's)")
    p.add_argument("--env-kwargs", type=parse_json_object, default={},
                   help='JSON object of env keyword arguments, e.g. \'{"pack": "arith"}\' '
                        "(with --run: applied on top of the run's own)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--model", help="local path or hub id (default: the embedded "
                                     f"{DEFAULT_MODEL})")
    who.add_argument("--run", help="a training run's output dir: evaluate its latest checkpoint "
                                   "and the model it started from")
    p.add_argument("--limit", type=_non_negative, default=50,
                   help="held-out tasks to evaluate (0 = the whole test split; default 50)")
    p.add_argument("--group-size", type=_positive, default=4,
                   help="K: samples per task for pass@k and the reward statistics (default 4)")
    p.add_argument("--max-new-tokens", type=_positive, default=256,
                   help="default 256 (per turn on a multi-turn env)")
    p.add_argument("--max-turns", type=_non_negative, default=0,
                   help="multi-turn envs: turns per episode (0 = the run's, else the env's)")
    p.add_argument("--max-episode-tokens", type=_non_negative, default=None,
                   help="multi-turn envs: token budget of an episode (default: the run's, "
                        "else none beyond the turn limit)")
    p.add_argument("--tool-role", choices=("auto", "tool", "ipython", "user"), default=None,
                   help="multi-turn envs: chat role of tool outputs (default: the run's, "
                        "else auto)")
    p.add_argument("--output-dir", default="runs/eval", help="default runs/eval")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold")
    p.add_argument("--seed", type=int, default=0, help="seed for sampling (default 0)")
    p.add_argument("--general-limit", type=_non_negative, default=50,
                   help="ARC-Easy items for the general check (0 skips it; default 50)")
    p.add_argument("--flag-min-reward", type=float, default=None,
                   help="flag only samples with at least this reward (default: half the max)")
    p.add_argument("--no-perturbations", action="store_true", help="skip the perturbations")
    p.add_argument("--batch-size", type=_positive, default=8,
                   help="prompts per generate call (default 8)")
    p.add_argument("--workers", type=_positive, default=16, help="grading threads")
    p.add_argument("--ray-address", default=None,
                   help="grade on a Ray cluster: 'auto', HOST:PORT of its head or "
                        "ray://HOST:10001 (nodes with the 'docker' resource grade)")
    p.add_argument("--num-threads", type=_non_negative, default=0,
                   help="torch CPU threads (0 = torch's default)")
    p.add_argument("--cpu-matmul", choices=CPU_MATMULS, default="onednn",
                   help="CPU: the Linear layers' fp32 products through oneDNN (default) or "
                        "torch's BLAS, as learner.run's flag")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (load_report(path) for path in args.compare)
        print(compare_table(a, b, labels=(Path(args.compare[0]).name or "A",
                                          Path(args.compare[1]).name or "B")))
        return 0
    if args.temperature <= 0 or not 0 < args.top_p <= 1:
        parser.error("--temperature must be > 0 and --top-p in (0, 1]")
    if args.ray_address is not None and (problems := ray_address_problems(args.ray_address)):
        parser.error("; ".join(problems))
    try:
        path = evaluate_command(args)
    except (SetupError, ModelLoadError, RunDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = load_report(path)
    print(f"report: {path} and {path.with_suffix('.html')}")
    figures = {k: v for k, v in report.items() if k in ("accuracy", "pass_at_k")}
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
