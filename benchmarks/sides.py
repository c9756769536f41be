"""What the side-by-side benchmarks share: every side in a fresh Python process, in alternating
order, and TRL's side (its ``GRPOTrainer`` fed one of our envs' prompts and graded by the env).

Used by ``learner_vs_trl.py`` (ours against TRL on CPU) and ``rollout_engines.py`` (the sampling
engines, and TRL with vLLM on a GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: The env the engine benchmarks train on: the demo's (arith level 1, only a boxed number counts).
ENV_KWARGS = {"pack": "arith", "level": 1, "require_boxed": True}


def alternating(sides: list[str], rounds: int) -> list[str]:
    """The order to run ``rounds`` rounds in: the first as given, the next reversed, and so on,
    so that neither side always runs on a machine the other has just warmed or loaded."""
    return [s for r in range(rounds) for s in (sides if r % 2 == 0 else sides[::-1])]


def run_fresh(script: str, argv: list[str], side: str) -> dict[str, Any]:
    """Run ``python script *argv --side side --json F`` and return what it wrote to F."""
    fd, out = tempfile.mkstemp(suffix=f"-{side}.json")
    os.close(fd)
    print(f"running {side} in a fresh process ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, script, *argv, "--side", side, "--json", out], check=True)
    with open(out) as f:
        return json.load(f)


def trl_dataset(env: Any, count: int, seed: int) -> Any:
    """The env's first ``count`` train prompts from the seed's offset (as our stream draws
    them), as the conversational dataset TRL takes, with each row's task id for the reward."""
    from datasets import Dataset

    tasks = [env.pack.task_at("train", i + seed * 1_000_003) for i in range(count)]
    return Dataset.from_list([
        {"prompt": [{"role": "user", "content": env.prompt(t)}], "task_id": t.id} for t in tasks])


def trl_reward(env: Any, workers: int) -> Callable[..., list[float]]:
    """The env's grade as a TRL reward function, over a pool of ``workers`` threads (the same
    concurrency as our ``score_workers``)."""

    def env_reward(prompts: list, completions: list, task_id: list[str], **_: Any) -> list[float]:
        texts = [c[0]["content"] for c in completions]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [r for r, _ in pool.map(env.score, task_id, texts)]

    return env_reward


def trl_step_timer() -> Any:
    """A callback whose ``times`` are the wall seconds of each optimizer step."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self._t = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self._t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.times.append(time.perf_counter() - self._t)

    return StepTimer()


def trl_config(*, steps: int, prompts: int, group: int, max_new_tokens: int, lr: float,
               beta: float, seed: int, **settings: Any) -> Any:
    """A ``GRPOConfig`` set as our learner runs: group reward scaling, T = 1, a constant
    learning rate without warm-up, Adam's beta2 0.99 and no weight decay, no gradient
    checkpointing, a dataset read in order, one log line per step, nothing saved or shown.
    ``settings`` adds to or overrides these."""
    from trl import GRPOConfig

    return GRPOConfig(**{
        "output_dir": tempfile.mkdtemp(prefix="trl-"), "max_steps": steps,
        "per_device_train_batch_size": prompts * group, "num_generations": group,
        "max_completion_length": max_new_tokens, "learning_rate": lr, "beta": beta,
        "seed": seed, "scale_rewards": "group", "temperature": 1.0, "logging_steps": 1,
        "report_to": [], "save_strategy": "no", "shuffle_dataset": False,
        "lr_scheduler_type": "constant", "warmup_steps": 0, "adam_beta2": 0.99,
        "weight_decay": 0.0, "disable_tqdm": True, "gradient_checkpointing": False,
        **settings})
