"""A step's reward as its named components, for ``--reward-norm normalize_then_sum`` (GDPO):
the env's components (``info["rewards"]``) with the env's weights, and what the learner adds
beyond their weighted sum (DAPO's overlong penalty; any term an episode adds) as one more
component, ``rest``, of weight 1, so that nothing the reward holds is dropped."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from learner.training.samples import StepSamples

#: The column of what the reward holds beyond the weighted components.
REST = "rest"
#: Below this the rest is rounding, not a term.
REST_TOLERANCE = 1e-9


def reward_components(samples: StepSamples, weights: Mapping[str, float]
                      ) -> tuple[Tensor, Tensor, list[str]]:
    """(B, K) component values, (K,) weights and the K names: every component with a nonzero
    weight, in the env's order, and ``rest`` when the reward trained on differs from their
    weighted sum. A sample whose grading failed has zeros (no group counts it)."""
    names = [name for name, w in weights.items() if w]
    device = samples.device
    rows = [[float(c.get(name, 0.0)) for name in names] for c in samples.scores.components]
    values = torch.tensor(rows, dtype=torch.float64, device=device).reshape(len(rows), len(names))
    w = torch.tensor([float(weights[name]) for name in names], dtype=torch.float64, device=device)
    graded = samples.graded
    rest = torch.where(graded, samples.rewards - values @ w, 0.0)
    if bool((rest.abs() > REST_TOLERANCE).any()):
        values = torch.cat([values, rest.unsqueeze(-1)], dim=-1)
        w = torch.cat([w, w.new_ones(1)])
        names.append(REST)
    return torch.where(graded.unsqueeze(-1), values, 0.0), w, names
