"""``--recipe``: one paper's hyper-parameters set together, so that a run named after an
algorithm is that algorithm and not one flag of it. Torch-free, as flag parsing is.

Precedence: defaults < the env's recipe (``--env-recipe``) < this preset < ``--config`` keys <
explicit flags. ``config.json`` records the preset's name (``recipe``), what it set and what the
user's own flags kept (``recipe_record``), beside the values themselves.

- ``grpo`` (Shao et al. 2024, DeepSeekMath 4.1): token mean per completion, the group's std,
  clip 0.2, KL beta 0.04.
- ``dapo`` (Yu et al. 2025): clip-higher (0.2, 0.28), no KL, the token mean over the step,
  dynamic sampling (on correctness), and the soft overlong punishment over the last 20% of the
  completion budget (the paper's 4096 of 20480 tokens).
- ``dr_grpo`` (Liu et al. 2025): the token sum over the constant P x G x L, no std scaling, no
  KL, clip 0.2.
- ``gspo`` (Zheng et al. 2025): the sequence-level ratio with its clip range (3e-4, 4e-4),
  sequence-mean aggregation (grpo) and no KL.
- ``cispo`` (MiniMax-M1, Chen et al. 2025; TRL ``loss_type="cispo"``): the importance weight
  capped and detached, at 1 + 4.0 = 5.0 (the paper gives no value; ScaleRL's epsilon_max and
  TRL's recommended 5.0), the token mean over the step (the paper's eq. 4 and TRL), the group's
  std (the paper's GRPO advantage) and no KL (the paper's objective has none).
"""

from __future__ import annotations

from typing import Any

from learner.choices import ALGORITHM_RECIPES

#: The fixed values of each preset (DAPO's overlong window depends on the budget: below).
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {"loss_type": "grpo", "importance_sampling_level": "token", "scale_rewards": "group",
             "epsilon": 0.2, "epsilon_high": 0.2, "beta": 0.04},
    "dapo": {"loss_type": "dapo", "importance_sampling_level": "token", "scale_rewards": "group",
             "epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.0, "dynamic_sampling": True,
             "dynamic_sampling_metric": "accuracy"},
    "dr_grpo": {"loss_type": "dr_grpo", "importance_sampling_level": "token",
                "scale_rewards": "none", "epsilon": 0.2, "epsilon_high": 0.2, "beta": 0.0},
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence",
             "scale_rewards": "group", "epsilon": 3e-4, "epsilon_high": 4e-4, "beta": 0.0},
    "cispo": {"loss_type": "cispo", "importance_sampling_level": "token", "epsilon_high": 4.0,
              "beta": 0.0},
}
#: DAPO's L_cache / L_max: 4096 / 20480.
DAPO_OVERLONG_SHARE = 0.2


def preset_keys(name: str | None) -> set[str]:
    """Every setting the preset ``name`` decides (none for None)."""
    if name is None:
        return set()
    return set(PRESETS[name]) | ({"overlong_cache"} if name == "dapo" else set())


def apply_preset(name: str | None, explicit: dict[str, Any], max_new_tokens: int) -> tuple[
        dict[str, Any], dict[str, Any] | None]:
    """The preset's values that the user's ``explicit`` keys leave to it, and the record for
    ``config.json`` (None for no preset). ``max_new_tokens``: the run's completion budget,
    which sizes DAPO's overlong window."""
    if name is None:
        return {}, None
    if name not in ALGORITHM_RECIPES:
        raise ValueError(f"--recipe must be one of {ALGORITHM_RECIPES}, got {name!r}")
    values = dict(PRESETS[name])
    if name == "dapo":
        values["overlong_cache"] = max(1, int(max_new_tokens * DAPO_OVERLONG_SHARE))
    applied = {k: v for k, v in values.items() if k not in explicit}
    record = {"recipe": name, "applied": applied,
              "overridden": sorted(k for k in values if k in explicit)}
    return applied, record


def describe(record: dict[str, Any]) -> str:
    """One line saying which algorithm preset a run follows and what it set."""
    shown = ", ".join(f"{k}={v}" for k, v in record["applied"].items())
    over = f" (your flags kept: {', '.join(record['overridden'])})" if record["overridden"] else ""
    return f"--recipe {record['recipe']}: {shown or 'nothing left to set'}{over}"
