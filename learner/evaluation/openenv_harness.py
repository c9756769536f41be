"""The evaluation result over OpenEnv, where its protocol allows it.

OpenEnv 0.10.0 has no evaluation endpoint on an env server (its HTTP routes are reset, step,
state, schema, the task API and MCP), so a served env carries no result and none is invented
here. What the protocol does define is an evaluation *harness* (``openenv.core.evals``): an
``EvalHarness`` whose ``run(harness_version, library_versions, dataset, eval_parameters)``
returns the scores, wrapped by ``run_from_config`` in an ``EvalResult`` (``config`` + ``scores``).
``GrpoGymHarness`` is that harness: it runs ``learner.eval`` and its scores are ``eval.json``
itself, the same shape; ``as_openenv_result`` wraps an existing ``eval.json`` the same way.

Needs the ``openenv`` extra (``pip install -e ".[openenv]"``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openenv.core.evals import EvalConfig, EvalHarness, EvalResult

from learner.evaluation.result_shape import RESULT_JSON, SHAPE, load_result

#: eval_parameters -> learner.eval flags (the value's JSON for dicts, commas for lists).
FLAGS = {"env_kwargs": "--env-kwargs", "model": "--model", "limit": "--limit",
         "samples_per_task": "--samples-per-task", "pass_k": "--pass-k",
         "max_new_tokens": "--max-new-tokens", "temperature": "--temperature",
         "top_p": "--top-p", "seed": "--seed", "max_turns": "--max-turns",
         "batch_size": "--batch-size", "num_threads": "--num-threads"}


class HarnessError(ValueError):
    """The eval_parameters cannot make a learner.eval run; the message says which."""


def _argv(dataset: str, params: Mapping[str, Any], out: Path) -> list[str]:
    unknown = sorted(set(params) - set(FLAGS) - {"output_dir"})
    if unknown:
        raise HarnessError(f"unknown eval_parameters {unknown}: give any of {sorted(FLAGS)}")
    argv = ["--env", dataset, "--output-dir", str(out), "--general-limit", "0",
            "--no-perturbations"]
    for key, value in params.items():
        if key == "output_dir" or value is None:
            continue
        if isinstance(value, dict):
            value = json.dumps(value)
        elif isinstance(value, list | tuple):
            value = ",".join(str(v) for v in value)
        argv += [FLAGS[key], str(value)]
    return argv


class GrpoGymHarness(EvalHarness):
    """OpenEnv's evaluation harness over ``python -m learner.eval``: ``dataset`` is a grpo/* env
    id, ``eval_parameters`` the flags in ``FLAGS`` (``output_dir`` too: where eval.json and
    the samples go, else a temporary folder); the scores are ``eval.json``."""

    def run(self, harness_version: str, library_versions: dict[str, str], dataset: str,
            eval_parameters: dict[str, Any]) -> dict[str, Any]:
        # The command line itself, in its own process (this module sits below the entry
        # points): what a user runs is what the harness runs.
        out_dir = eval_parameters.get("output_dir")
        with tempfile.TemporaryDirectory(prefix="grpo-gym-eval-") as tmp:
            out = Path(out_dir or tmp)
            argv = _argv(dataset, eval_parameters, out)
            done = subprocess.run([sys.executable, "-m", "learner.eval", *argv],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or ["no output"]
                said = next((line for line in lines if "error" in line), lines[-1])
                raise HarnessError(f"python -m learner.eval exited {done.returncode} for "
                                   f"{dataset}: {said}")
            return load_result(out / RESULT_JSON)


def as_openenv_result(result: Mapping[str, Any] | str | Path) -> EvalResult:
    """An ``eval.json`` (its object, its file or its folder) as OpenEnv's ``EvalResult``: the
    scores are the result itself; the config says what produced it."""
    if not isinstance(result, Mapping):
        result = load_result(result)
    versions = {k: str(v) for k, v in (result.get("versions") or {}).items()}
    sampling = dict(result.get("sampling") or {})
    ks = [int(k.removeprefix("pass@")) for k in result.get("pass_at_k", {})]
    config = EvalConfig(
        harness_name=GrpoGymHarness.__name__, harness_version=SHAPE,
        library_versions=versions, dataset=str(result.get("env")),
        eval_parameters={"env_kwargs": result.get("env_kwargs") or {},
                         "model": (result.get("model") or {}).get("name"),
                         "limit": result.get("n_tasks"), "pass_k": ks,
                         **{k: v for k, v in sampling.items() if k in FLAGS}})
    return EvalResult(config=config, scores=dict(result))
