"""What the command-line entry points share: a training run from a ``Config`` to its printed
summary (``python -m learner.run`` and ``learner.demo`` both run one). The env and the Ray
scorer are made from flags in ``learner.env_setup`` (re-exported here).

Only light modules at import time: flags are parsed and checked before torch, transformers and
the envs load, so --help and flag errors answer at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from learner import presets, run_layout
from learner.checkpoint_bound import resume_mismatch
from learner.config import Config
from learner.env_setup import SetupError, make_env, ray_scorer
from learner.evaluation.infra import InfraCount, accuracy_line
from learner.model_name import model_problem
from learner.provenance import provenance
from learner.recipe import describe
from learner.resume_command import changed_on_resume, resume_command
from learner.training import checkpoint
from learner.training.output_dir import clear_run, output_dir_problem, resume_problem


def format_eval(metrics: dict[str, Any]) -> str:
    """One line of held-out figures: accuracy, full marks, pass@k, perturbed prompts, with the
    infrastructure failures beside them; or, past 1% of the samples, why there are none."""
    n = int(metrics.get("eval/n", 0))
    count = InfraCount(n, int(metrics.get("eval/infra_errors") or 0),
                       metrics.get("eval/infra_reason"))
    if count.refused or metrics.get("eval/accuracy") is None:
        return accuracy_line(None, count, what="accuracy")
    parts = [f"accuracy {metrics['eval/accuracy']:.1%}"]
    if metrics.get("eval/full_marks") is not None:
        parts.append(f"full marks (all reward components) {metrics['eval/full_marks']:.1%}")
    for k, v in metrics.items():
        if k.startswith("eval/pass@"):
            parts.append(f"{k.removeprefix('eval/')} " + (
                "- (more than 1% of its samples were infrastructure failures)" if v is None
                else f"{v:.1%}"))
    text = ", ".join(parts) + f" on {n} held-out tasks {count.note()}"
    perturbed = [f"{k.removeprefix('eval/perturb/')} {v:.1%}" for k, v in metrics.items()
                 if k.startswith("eval/perturb/")]
    return text + ("; with changed prompts: " + ", ".join(perturbed) if perturbed else "")


def run_record(config: Config, trainer: Any) -> dict[str, Any]:
    """``config.json``: the flags, and what else decides the numbers (``provenance``: the CPU
    threads the trainer set, the devices, package versions, the git commit)."""
    import torch

    # config.to_dict() holds ``recipe``: which variant and file set which values, and
    # ``device`` the flag; provenance the device it resolved to (``placement``), and the
    # vLLM engine's size where it was derived from the step (``vllm_sizing``).
    record = provenance(torch.get_num_threads(), str(trainer.device),
                        trainer.accelerator.num_processes)
    # What sampled (--rollout-engine auto resolved): vllm, or the learner's own loop (hf).
    record["rollout_engine"] = "hf" if getattr(trainer, "engine", None) is None else "vllm"
    size = getattr(trainer, "engine_size", None)
    if size is not None:
        # ... and whether it sleeps while the trainer updates (--vllm-sleep, on CUDA only)
        engine = getattr(trainer, "engine", None)
        record["vllm_engine"] = {**size.record(), "sleeps": bool(getattr(engine, "sleeps", False))}
    return {**config.to_dict(), "provenance": record}


def resumed_changes(out: Path, config: Config) -> list[dict[str, Any]]:
    """The run's earlier ``resumed_changes`` (from its config.json in ``out``), plus this
    resume's when it changes flags, which one line then names: config.json records the new
    values, so the old ones are kept there."""
    previous = run_layout.read_record(out)  # checked by ``setup_problem``: a run's record
    earlier = previous.get("resumed_changes")
    history = list(earlier) if isinstance(earlier, list) else []
    changed = changed_on_resume(previous, config)
    if changed:
        latest = run_layout.latest(out)
        history.append({"checkpoint": latest.name if latest else None, "changed": changed})
        listed = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in changed.items())
        print(f"note: --resume changes {listed}: the new values apply from the next step "
              "(config.json keeps the earlier ones under resumed_changes)", flush=True)
    return history


def setup_problem(config: Config) -> str | None:
    """Why the run cannot start, found before torch loads (``None``: it can): the output
    folder, ``--resume`` without a checkpoint, a model path that does not exist."""
    problem = output_dir_problem(config.output_dir, resume=config.resume,
                                 overwrite=config.overwrite)
    if problem is None and config.resume:
        problem = resume_problem(config.output_dir)
        if problem is None and (Path(config.output_dir) / "config.json").is_file():
            try:
                problem = resume_mismatch(run_layout.read_record(config.output_dir), config)
            except run_layout.RecordError as exc:  # not JSON, or not a run's
                problem = (f"--resume: {exc}: put the run's back, or start the run again there "
                           "with --overwrite")
    return problem or model_problem(config.model)


def train(config: Config) -> int:
    """A whole training run: set up, train, save ``final/``, print the held-out figures and the
    reward-hack monitor's total; returns the exit status (1 on a set-up error or a grading
    outage, 130 / 143 when SIGINT / SIGTERM stopped it; each says how to go on in one line)."""
    problem = setup_problem(config)
    if problem is not None:  # before anything loads: a folder that holds a run stays intact
        print(f"error: {problem}", file=sys.stderr)
        return 1
    try:
        return _train(config)
    except KeyboardInterrupt:  # before training started, or while final/ was being saved
        saved = run_layout.latest(config.output_dir)
        then = (f"resume with: {resume_command(config)}" if saved is not None
                else "nothing was saved")
        print(f"interrupted (SIGINT) outside a training step; {then}", file=sys.stderr)
        return 130


def _train(config: Config) -> int:
    if config.env_recipe_record is not None:
        print(describe(config.env_recipe_record), flush=True)
        for why in config.env_recipe_record["why"]:
            print(f"  why: {why}", flush=True)
    if config.recipe_record:
        print(presets.describe(config.recipe_record), flush=True)
    print(f"loading {config.env} and the model (torch, transformers)...", flush=True)
    try:
        env = make_env(config)  # torch-free: a misspelled env or pack answers at once
        # Grading on this machine needs its engine: one that is down stops the run here, not
        # after a model load and an evaluation that score nothing (Ray: checked on joining).
        if config.ray_address is None and (outage := env.infra_outage()) is not None:
            raise SetupError(outage)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    from learner.model import ModelLoadError
    from learner.training.sharding import UnsupportedBackend

    scorer = None
    try:
        scorer = ray_scorer(env, config.ray_address)
        from envs.startup_noise import silence_deepspeed_cpu_notice
        from learner.training.trainer import GRPOTrainer  # heavy imports after the cheap checks

        silence_deepspeed_cpu_notice()  # accelerate imports DeepSpeed, which says "CPU" on CPU

        # A finished run's final/ holds its weights: the last checkpoint (optimizer state
        # too, about 3x the model) is only written when asked for, to train further.
        trainer = GRPOTrainer(config, env=env, scorer=scorer,
                              save_at_end=config.keep_final_checkpoint)
    except (SetupError, ModelLoadError, UnsupportedBackend) as exc:
        if scorer is not None:
            scorer.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    resumed: bool | None = None
    if config.resume:
        # The checkpoint loads before config.json is written: one this run cannot continue
        # (another model's tensors, another sampler's state) leaves the run's record as it was.
        try:
            resumed = trainer.resume()
        except BaseException as exc:
            expected = isinstance(exc, SetupError)
            trainer.close(wait=expected)  # after an unexpected error no barrier, as below
            if scorer is not None:
                scorer.close()
            if not expected:
                raise
            print(f"error: {exc}", file=sys.stderr)
            return 1
    out = Path(config.output_dir)
    main = trainer.accelerator.is_main_process
    if main:
        # Cleared only now that the new run has started: a failed set-up replaces nothing.
        if config.overwrite and (removed := clear_run(out)):
            print(f"--overwrite: removed the earlier run's {', '.join(removed)} from {out}")
        out.mkdir(parents=True, exist_ok=True)
        record = run_record(config, trainer)
        if config.resume and (out / "config.json").is_file():
            record["resumed_changes"] = resumed_changes(out, config)
        (out / "config.json").write_text(json.dumps(record, indent=1))
    from learner.training.stops import OutOfMemory, RunStopped

    failed = False  # after an unexpected error no barrier: a peer may never arrive
    try:
        result = trainer.train(resumed)
        trainer.save_model(out / "final")
    except OutOfMemory as stop:
        if trainer.accelerator.num_processes > 1:
            _end_launch(trainer, scorer, f"error: {stop.alone()}; resume from the last "
                                         f"checkpoint with: {resume_command(config)}")
        if main:
            print(f"error: {stop}; resume with: {resume_command(config)}", file=sys.stderr,
                  flush=True)
        return stop.exit_code
    except RunStopped as stop:
        if main:
            prefix = "error: " if stop.exit_code == 1 else ""
            print(f"{prefix}{stop}; resume with: {resume_command(config)}", file=sys.stderr,
                  flush=True)
        return stop.exit_code
    except BaseException as exc:
        failed = True
        if trainer.accelerator.num_processes > 1 and peer_ended(exc):
            _end_launch(trainer, scorer, "error: another process of the launch ended (its "
                                         f"line says why): {first_line(exc)}")
        raise
    finally:
        if scorer is not None:
            scorer.close()  # the nodes' actors and their sandbox containers
        trainer.close(wait=not failed)
    if main:
        if not config.keep_final_checkpoint:
            checkpoint.remove_all(out)  # periodic ones: final/ supersedes them
        print(finished_lines(result, out, config.keep_final_checkpoint))
    return 0


def peer_ended(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because another process of the launch ended
    (gloo's closed connection, NCCL's aborted communicator)."""
    import torch

    text = str(exc)
    return isinstance(exc, torch.distributed.DistBackendError) or any(
        w in text for w in ("Connection closed by peer", "Connection reset by peer",
                            "communicator was aborted"))


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _end_launch(trainer: Any, scorer: Any, line: str) -> None:
    """One process of several cannot go on: say why in one line and end this process now,
    without the process group's collectives (its peers are elsewhere in the step and would
    wait for it forever). ``accelerate launch`` (torchrun) then stops the other processes."""
    import os

    if scorer is not None:
        scorer.close()  # the nodes' actors and their sandbox containers
    print(f"{line} [process {trainer.accelerator.process_index} of "
          f"{trainer.accelerator.num_processes}]", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def finished_lines(result: dict[str, Any], out: Path, kept_checkpoint: bool) -> str:
    """What a finished run prints: the held-out figures before and after, the reward-hack
    monitor's total, where the metrics and the model are, and the run folder's size."""
    from learner.training.hack_monitor import summary

    lines = []
    if "before" in result:
        lines.append(f"held-out before: {format_eval(result['before'])}")
    if "after" in result:
        lines.append(f"held-out after:  {format_eval(result['after'])}")
    if result.get("flags") is not None:
        lines.append(f"reward-hack monitor over training: {summary(result['flags'])}")
    lines.append(f"metrics: {out / 'metrics.jsonl'}; model: {out / 'final'}")
    lines.append(disk_line(out, kept_checkpoint))
    return "\n".join(lines)


def disk_line(out: Path, kept_checkpoint: bool) -> str:
    """The run folder's size, and how to keep more (or what was kept)."""
    size = checkpoint.folder_bytes(out)
    parts = [f"final/ {_size(checkpoint.folder_bytes(out / 'final'))}"]
    if kept_checkpoint:
        parts.append(f"checkpoints/ {_size(checkpoint.folder_bytes(out / 'checkpoints'))}")
        more = "the last checkpoint is kept (--keep-final-checkpoint): --resume --steps N trains on"
    else:
        more = ("checkpoints were deleted as the run finished: --keep-final-checkpoint keeps "
                "the last one, to --resume with more --steps")
    return f"run folder {out}: {_size(size)} ({', '.join(parts)}); {more}"


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"
