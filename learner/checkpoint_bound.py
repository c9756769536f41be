"""What a checkpoint is bound to: the flags a ``--resume`` cannot change (its tensors' model and
LoRA rank, its sampler's state, its schedule's position), checked against the run's
config.json before anything loads (``launch``), and against the checkpoint's own record of them
where config.json is gone (``trainer.resume``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from learner.config import Config

#: Flags a checkpoint is bound to, which a resume cannot change: its tensors' model and LoRA
#: rank, its sampler's state, and its schedule's position (counted in optimizer steps, which
#: --num-iterations scales).
CHECKPOINT_BOUND = ("model", "lora_r", "sampler", "num_iterations")


def recorded(config: Config) -> dict[str, Any]:
    """``config`` as its run's config.json holds it (JSON's types: tuples as lists), to compare
    with a record read back."""
    return json.loads(json.dumps(config.to_dict()))


def resume_mismatch(previous: dict[str, Any], config: Config) -> str | None:
    """Why ``config`` cannot continue the run whose ``config.json`` is ``previous`` (None: it
    can): its checkpoint holds the weights (and optimizer state) of the run's model and LoRA
    rank, which another would load as a wall of missing names, its sampler's state and its
    schedule's position (``CHECKPOINT_BOUND``)."""
    now = recorded(config)
    changed = [name for name in CHECKPOINT_BOUND
               if name in previous and not same_value(name, previous[name], now.get(name))]
    if not changed:
        return None
    ran = ", ".join(f"--{n.replace('_', '-')} {previous[n]}" for n in changed)
    asked = ", ".join(f"--{n.replace('_', '-')} {now.get(n)}" for n in changed)
    return (f"--resume: the run in {config.output_dir} trained with {ran}, which its checkpoint "
            f"holds; it cannot continue with {asked}: give the run's, or train further in a new "
            f"run from its weights (--model {config.output_dir}/final --output-dir ANOTHER)")


def same_value(name: str, then: Any, now: Any) -> bool:
    """Whether two values of flag ``name`` are one: a model folder named two ways (relative,
    absolute, through a link) is one model."""
    if then == now:
        return True
    if name == "model" and isinstance(then, str) and isinstance(now, str):
        a, b = Path(then).expanduser(), Path(now).expanduser()
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    return False


def bound(config: Config) -> dict[str, Any]:
    """The ``CHECKPOINT_BOUND`` flags of ``config`` as a checkpoint records them (a model folder
    by its absolute path, so that a resume from another working folder finds it)."""
    now = recorded(config)
    values = {name: now.get(name) for name in CHECKPOINT_BOUND}
    model = values["model"]
    if isinstance(model, str) and Path(model).expanduser().exists():
        values["model"] = str(Path(model).expanduser().resolve())
    return values
