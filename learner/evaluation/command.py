"""What ``python -m learner.eval`` does once its flags are parsed: set up the env (from a run's
config with ``--run``), evaluate the policy (and, with ``--run``, the model it started from),
and write the report. ``learner/eval.py`` holds the flags, so that --help and flag errors answer
before this module loads torch and transformers.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from envs.startup_noise import silence_deepspeed_cpu_notice
from learner.config import Config, ConfigError
from learner.env_setup import SetupError, make_env, ray_scorer
from learner.evaluation.gates import GateSettings, run_gates
from learner.evaluation.general import ARC_EASY
from learner.evaluation.heldout import heldout_tasks
from learner.evaluation.report import deltas, write_report
from learner.evaluation.result_shape import (
    RESULT_JSON,
    model_identity,
    result_from_samples,
    write_result,
)
from learner.evaluation.run_dir import RunDirError, load_run_policy, run_config, run_env
from learner.model import DEFAULT_MODEL, ModelLoadError, load_model, load_tokenizer
from learner.provenance import package_versions
from learner.sampling.kernels import onednn_linear

#: With ``--run``: the starting model's result, beside the policy's ``eval.json``.
START_RESULT = "eval_start.json"

#: Moves a loaded model to the evaluation's device (``placement.moved``).
Placer = Callable[[PreTrainedModel], PreTrainedModel]
#: Set-up failures that ``learner.eval`` reports as one line (exit status 1).
ERRORS = (SetupError, ModelLoadError, RunDirError)


def metadata(args: argparse.Namespace, env: LearnerEnv, model_name: str, n_tasks: int,
             settings: GateSettings, device: torch.device | None = None) -> dict[str, Any]:
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
        "versions": package_versions() | {"python": platform.python_version()},
        # As learner.run's config.json: the flag, and the device it resolved to (placement).
        "device": getattr(args, "device", "auto"),
        "provenance": {"device": str(device) if device is not None else None},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _write_samples(path: Path, samples: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")


def _eval_result(args: argparse.Namespace, env: LearnerEnv, model: PreTrainedModel, name: str,
                 samples: list[dict[str, Any]], settings: GateSettings) -> dict[str, Any]:
    """``eval.json``'s object (``learner.evaluation.result_shape``) from the sampled pass:
    ``--samples-per-task`` completions per task at the sampling temperature."""
    path = name if Path(name).is_dir() else getattr(model, "name_or_path", None)
    identity = model_identity(name, path if path and Path(path).is_dir() else None,
                              getattr(model.config, "_commit_hash", None))
    ks = getattr(args, "pass_k", None) or sorted({1, settings.group_size})
    sampled = [s for s in samples if s.get("source") == "sampled"]
    return result_from_samples(
        sampled, ks, env=env.env_id or args.env, pack=env.pack.name,
        pack_version=env.pack.pack_version, model=identity,
        sampling={"samples_per_task": settings.group_size, "temperature": settings.temperature,
                  "top_p": settings.top_p, "max_new_tokens": settings.max_new_tokens,
                  "seed": settings.seed},
        extra={"env_kwargs": args.env_kwargs, "split": "test",
               "versions": package_versions() | {"python": platform.python_version()},
               "created": datetime.now(UTC).isoformat(timespec="seconds")})


def _evaluate(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, env: LearnerEnv,
              tasks: list, settings: GateSettings, label: str, scorer: Any = None,
              cpu_matmul: str = "onednn", place: Placer = lambda m: m) -> dict[str, Any]:
    print(f"evaluating {label} on {len(tasks)} held-out tasks ...", file=sys.stderr)
    model = place(model)
    onednn_linear.route_on_cpu(model, cpu_matmul)
    start = time.perf_counter()
    report = run_gates(model, tokenizer, env, tasks, settings,
                       log=lambda line: print(line, file=sys.stderr), scorer=scorer)
    report["timing"]["total_s"] = round(time.perf_counter() - start, 3)
    return report


def evaluate_command(args: argparse.Namespace, device: torch.device | None = None,
                     place: Placer = lambda m: m) -> Path:
    """Evaluate as the parsed flags say; returns the path of ``report.json``. Raises one of
    ``ERRORS`` when the env, the cluster, the run or the model cannot be set up. ``device``:
    where ``--device`` resolved (``learner.training.placement``, by the entry point), and
    ``place`` moves a loaded model there."""
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
        return _evaluate_all(args, env, scorer, start_model, device, place)
    finally:
        if scorer is not None:
            scorer.close()


def _evaluate_all(args: argparse.Namespace, env: LearnerEnv, scorer: Any, start_model: str | None,
                  device: torch.device | None, place: Placer) -> Path:
    silence_deepspeed_cpu_notice()  # accelerate imports DeepSpeed, which says "CPU" on CPU
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
                       args.cpu_matmul, place)
    samples = report.pop("samples")
    write_result(_eval_result(args, env, policy, policy_name, samples, settings),
                 out / RESULT_JSON)
    _write_samples(out / "samples.jsonl", samples)
    report = {"metadata": metadata(args, env, policy_name, len(tasks), settings, device),
              **report}
    if args.run:
        report["metadata"]["run"] = str(args.run)
        report["metadata"]["start_model"] = start_name
        del policy  # two 135M+ models fit, but there is no need to hold both
        start = load_model(start_model)
        baseline = _evaluate(start, tokenizer, env, tasks, settings,
                             f"the starting model {start_name}", scorer, args.cpu_matmul, place)
        samples = baseline.pop("samples")
        # The starting model's result beside the policy's: compare START_RESULT eval.json.
        write_result(_eval_result(args, env, start, start_name, samples, settings),
                     out / START_RESULT)
        _write_samples(out / "samples_start.jsonl", samples)
        report["baseline"] = {"model": start_name, **baseline}
        report["deltas"] = deltas(report, baseline)
    return write_report(report, out)
