"""The sampling distribution as pure tensor functions: logits divided by the temperature, then cut
to the top-p nucleus (Holtzman et al. 2020) and renormalised. The sampler draws from it and the
loss scores under it, so both layers import it from here (sampling must not import training).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import Tensor

# Rows of logits sorted at a time to find their nucleus: bounds the sort's extra memory.
_NUCLEUS_CHUNK = 256


def sampling_logits(logits: Tensor, temperature: float = 1.0, top_p: float = 1.0,
                    keep: Tensor | None = None) -> Tensor:
    """Logits (..., V) of the distribution tokens are sampled from: divided by ``temperature``,
    and -inf outside the top-p nucleus (the fewest most likely tokens whose mass reaches
    ``top_p``; always at least the top one). ``keep`` (...,) names a token per row kept in
    the support whatever its rank: the sampled one, which a later pass scores even if float
    noise or an update moved it out of the nucleus."""
    logits = logits.float()
    # Dividing by 1 would copy the (positions, vocabulary) logits for nothing.
    scaled = logits if temperature == 1.0 else logits / temperature
    if top_p >= 1.0:
        return scaled
    drop = scaled < nucleus_floor(scaled.detach(), top_p)
    if keep is not None:
        drop = drop.scatter(-1, keep.unsqueeze(-1), False)
    return scaled.masked_fill(drop, float("-inf"))


@torch.no_grad()
def nucleus_floor(scaled: Tensor, top_p: float) -> Tensor:
    """(..., 1) the smallest logit inside each row's top-p nucleus: a token is in the nucleus
    when the mass of the tokens ranked above it is at most ``top_p``."""
    flat = scaled.reshape(-1, scaled.shape[-1])
    floors = []
    for rows in flat.split(_NUCLEUS_CHUNK):
        ranked = rows.sort(dim=-1, descending=True).values
        probs = torch.softmax(ranked, dim=-1)
        inside = (probs.cumsum(-1) - probs <= top_p).sum(-1, keepdim=True).clamp(min=1)
        floors.append(ranked.gather(-1, inside - 1))
    return torch.cat(floors).reshape(*scaled.shape[:-1], 1)


def token_logprobs(logits: Tensor, tokens: Tensor, temperature: float = 1.0,
                   top_p: float = 1.0) -> Tensor:
    """log pi(token) under the sampling distribution for (..., V) logits and (...) tokens,
    without materialising a log-softmax."""
    scaled = sampling_logits(logits, temperature, top_p, keep=tokens)
    picked = scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(scaled, dim=-1)


def token_entropy(logits: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """Entropy of the sampling distribution per position, (...)."""
    probs = torch.softmax(sampling_logits(logits, temperature, top_p), dim=-1)
    return -torch.special.xlogy(probs, probs).sum(-1)  # 0 log 0 = 0 outside the nucleus


# -- the sampler's random draws ----------------------------------------------------------------
class DrawGenerators:
    """One torch generator per device, all seeded alike: the random draws of one sampler (the
    background draw of --async-steps 1) kept apart from torch's global generators, which the
    update's dropout (LoRA's included) draws from on the other thread."""

    def __init__(self, seed: int):
        self.seed = seed
        self._by_device: dict[torch.device, torch.Generator] = {}

    def on(self, device: torch.device) -> torch.Generator:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._by_device:
            self._by_device[device] = torch.Generator(device=device).manual_seed(self.seed)
        return self._by_device[device]


_drawing = threading.local()


@contextlib.contextmanager
def drawing_with(generators: DrawGenerators) -> Iterator[None]:
    """Within this block, on this thread only, ``uniform`` draws from ``generators``."""
    before = getattr(_drawing, "generators", None)
    _drawing.generators = generators
    try:
        yield
    finally:
        _drawing.generators = before


def uniform(rows: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """(rows, 1) uniform draws in [0, 1): from this thread's ``drawing_with`` generators, else
    torch's global generator (as ``torch.rand``)."""
    generators: DrawGenerators | None = getattr(_drawing, "generators", None)
    generator = generators.on(device) if generators is not None else None
    return torch.rand(rows, 1, dtype=dtype, device=device, generator=generator)
