"""A model's Linear layers on CPU through oneDNN, the fp32 GEMM library that ships inside torch.

torch multiplies fp32 matrices on CPU with its BLAS (MKL in the PyPI wheels). At a small model's
shapes, and on CPUs where MKL does not take its fastest path (AMD's, as on the machine this was
measured on), oneDNN is faster: ``benchmarks/onednn_linear.py`` times a step's generation
(a few dozen rows against each weight per decoding step, and the 49k-row LM head) and its
loss passes both ways. Both compute in full fp32 (torch's default fp32 precision for oneDNN
is "ieee": no implicit bf16 or tf32); only the summation order differs, as between any two
GEMM libraries.

``route_linears(model)`` turns each ``nn.Linear`` of the model into ``OneDNNLinear`` (same
parameters, same state dict, still an ``nn.Linear`` for PEFT and anything else that checks).
Its forward and input gradient go through oneDNN; the weight gradient stays with torch's
BLAS, which measured as fast or faster for that product. Anything but a plain fp32 CPU call
(autocast, another device or dtype) takes ``nn.Linear``'s own path.

``packed_weights(model)`` is for decoding: inside it, products without gradients use a copy of
each weight reordered once into oneDNN's blocked layout, instead of oneDNN reordering the plain
weight on every call. A decoding step multiplies a few dozen rows by every weight, where that
per-call reorder is a large share of the work (``benchmarks/onednn_linear.py``). The packed
product gives the same values as the plain one (bitwise, measured from 8 rows up).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
from torch import Tensor, nn

# oneDNN (its primitive cache) and ideep (its LRU of computations) keep up to 1024 entries, one
# per input shape, by default, and a run's shapes change every micro-batch and every decoding
# batch, so resident memory would grow with each new shape, step after step
# (tests/test_learner_onednn_linear.py bounds it). Sixteen entries keep it small at the same
# step time. Both are read when the first product is made, so setting them
# here, before any model is routed, is in time; a value the user set stays.
CACHE_ENTRIES = "16"
CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
for _name in CACHE_VARIABLES:
    os.environ.setdefault(_name, CACHE_ENTRIES)

# The row count oneDNN is told to expect when a weight is packed (decoding: a few dozen rows).
PACK_ROWS = 32


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDNNLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        flat = grad.reshape(-1, grad.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _linear(flat, weight.t(), None).view(*grad.shape[:-1], weight.shape[1])
        if ctx.needs_input_grad[1]:
            dw = flat.t() @ x.reshape(-1, x.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = flat.sum(0)
        return dx, dw, db


class OneDNNLinear(nn.Linear):
    """``nn.Linear`` whose fp32 CPU products run in oneDNN (see the module docstring)."""

    # Inside ``packed_weights``: (packed weight, the weight's storage and version it was made
    # from). A weight changed in place since (an optimizer step) is no longer matched.
    _packed: tuple[Tensor, int, int] | None = None

    def forward(self, x: Tensor) -> Tensor:
        if (x.device.type != "cpu" or x.dtype != torch.float32
                or self.weight.dtype != torch.float32 or _autocast_on()):
            return super().forward(x)
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad
                                        or (self.bias is not None and self.bias.requires_grad)):
            return _OneDNNLinearFn.apply(x, self.weight, self.bias)
        return _linear(x, self._inference_weight(), self.bias)

    def _inference_weight(self) -> Tensor:
        packed = self._packed
        if packed is not None and packed[1:] == _identity(self.weight):
            return packed[0]
        return self.weight


def _identity(weight: Tensor) -> tuple[int, int]:
    return weight.data_ptr(), weight._version


@contextlib.contextmanager
def packed_weights(model: nn.Module) -> Iterator[int]:
    """Within the block, ``model``'s oneDNN layers multiply without gradients by packed copies
    of their weights (see the module docstring); yields how many layers were packed. The copies
    hold as much memory as the weights and are dropped on exit."""
    layers = [m for m in model.modules() if isinstance(m, OneDNNLinear)
              and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32]
    try:
        with torch.no_grad():
            for m in layers:
                m._packed = (torch.ops.mkldnn._reorder_linear_weight(m.weight, PACK_ROWS),
                             *_identity(m.weight))
        yield len(layers)
    finally:
        for m in layers:
            m._packed = None


def _autocast_on() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.is_autocast_cpu_enabled()


def available() -> bool:
    """Whether this torch build can run oneDNN's linear on this CPU (checked on a tiny product)."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        x, w = torch.ones(2, 3), torch.ones(4, 3)
        return bool(torch.equal(_linear(x, w, None), x @ w.t()))
    except (RuntimeError, AttributeError):  # an op this torch build does not have
        return False


def route_on_cpu(model: nn.Module, cpu_matmul: str) -> int:
    """``route_linears`` when ``cpu_matmul`` asks for oneDNN, the model is on CPU and this torch
    build has oneDNN's linear; returns how many layers were routed (0 otherwise)."""
    params = next(model.parameters(), None)
    if cpu_matmul != "onednn" or params is None or params.device.type != "cpu" \
            or not available():
        return 0
    return route_linears(model)


def route_linears(model: nn.Module) -> int:
    """Turn every plain ``nn.Linear`` of ``model`` into ``OneDNNLinear``; returns how many."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = OneDNNLinear
            n += 1
    return n
