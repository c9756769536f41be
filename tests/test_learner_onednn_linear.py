"""Linear layers through oneDNN on CPU: the same values and gradients as nn.Linear, the same
parameters and state dict, and the trainer's default on CPU (``--cpu-matmul torch`` opts out)."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from learner.sampling.kernels.onednn_linear import (
    CACHE_VARIABLES,
    OneDNNLinear,
    available,
    packed_weights,
    route_linears,
)
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h

pytestmark = pytest.mark.skipif(not available(), reason="this torch build has no oneDNN linear")


def _pair(bias: bool) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(0)
    plain = nn.Linear(48, 80, bias=bias)
    routed = copy.deepcopy(plain)
    assert route_linears(routed) == 1 and type(routed) is OneDNNLinear
    return plain, routed


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(7, 48), (3, 5, 48)])
def test_values_and_every_gradient_match_nn_linear(bias, shape):
    plain, routed = _pair(bias)
    x = torch.randn(*shape)
    grads = []
    for layer in (plain, routed):
        xi = x.clone().requires_grad_(True)
        out = layer(xi)
        (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
        grads.append([out, xi.grad, layer.weight.grad] + ([layer.bias.grad] if bias else []))
    for a, b in zip(*grads, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the inference path
        assert torch.allclose(routed(x), plain(x), atol=1e-5, rtol=1e-5)


def test_frozen_weights_get_no_gradient_and_autocast_takes_nn_linears_path():
    plain, routed = _pair(bias=True)
    routed.requires_grad_(False)
    x = torch.randn(4, 48, requires_grad=True)
    routed(x).sum().backward()
    assert x.grad is not None and routed.weight.grad is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert routed(x).dtype == plain(x).dtype == torch.bfloat16


def test_a_routed_model_keeps_its_parameters_state_dict_and_outputs():
    plain, routed = h.model(), h.model()
    n = route_linears(routed)
    assert n == sum(type(m) is OneDNNLinear for m in routed.modules()) > 0
    assert list(routed.state_dict()) == list(plain.state_dict())
    # The tied LM head still shares the embedding's parameter.
    assert routed.lm_head.weight is routed.model.embed_tokens.weight
    ids = torch.randint(5, 500, (2, 9))
    with torch.no_grad():
        assert torch.allclose(routed(ids).logits, plain(ids).logits, atol=1e-4, rtol=1e-4)
    assert type(copy.deepcopy(routed).lm_head) is OneDNNLinear  # a reference copy keeps it


def test_the_trainer_routes_a_loaded_model_on_cpu_unless_told_not_to(tmp_path):
    from learner.model import load_model

    path = str(h.save_tiny(tmp_path / "tiny"))
    for choice, routed in (("onednn", True), ("torch", False)):
        cfg = h.config(tmp_path / choice, steps=1, eval=False, beta=0.1, cpu_matmul=choice)
        t = GRPOTrainer(cfg, model=load_model(path), tokenizer=h.tokenizer(), env=h.ShortEnv())
        for model in (t.policy, t.update.ref_model):
            kinds = {type(m) for m in model.modules() if isinstance(m, nn.Linear)}
            assert kinds == ({OneDNNLinear} if routed else {nn.Linear})
        t.update.policy_is_reference = False  # run the reference pass too
        stats = t.update(h.step_batch(t)[2])
        assert stats.kl == pytest.approx(0.0, abs=1e-6)  # same weights, same kernels


def test_packed_weights_give_the_same_products_and_notice_a_changed_weight():
    plain, routed = _pair(bias=True)
    x = torch.randn(16, 48)
    with torch.no_grad():
        with packed_weights(routed) as n:
            assert n == 1 and routed._packed is not None
            assert torch.allclose(routed(x), plain(x), atol=1e-5, rtol=1e-5)
            # A weight changed in place (an optimizer step) is used, not the stale packed copy.
            plain.weight.mul_(2)
            routed.weight.mul_(2)
            assert torch.allclose(routed(x), plain(x), atol=1e-5, rtol=1e-5)
        assert routed._packed is None  # dropped on exit
    with packed_weights(routed):  # with gradients the parameter itself is used
        xi = x.clone().requires_grad_(True)
        routed(xi).sum().backward()
    assert routed.weight.grad is not None and xi.grad is not None


def test_packed_weights_leave_a_model_without_onednn_layers_alone():
    model = h.model()
    with packed_weights(model) as n:
        assert n == 0


SHAPES_SCRIPT = """
import psutil, torch
from torch import nn
from learner.sampling.kernels.onednn_linear import route_on_cpu
torch.manual_seed(0)
layer = nn.Sequential(nn.Linear(576, 1536))
assert route_on_cpu(layer, "onednn") == 1
process = psutil.Process()
start = process.memory_info().rss
for rows in range(1, 401):  # a new shape each call, as micro-batches and decoding batches make
    layer(torch.randn(rows, 576, requires_grad=True)).sum().backward()
print((process.memory_info().rss - start) / 2**20)
"""


def grown_mib(**env: str) -> float:
    clean = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
    out = subprocess.run([sys.executable, "-c", SHAPES_SCRIPT], env=clean | env, check=True,
                         capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.split()[-1])


def test_products_of_ever_new_shapes_do_not_grow_memory_unless_the_user_asks_for_big_caches():
    # 400 shapes: oneDNN's and ideep's own default caches (1024 entries) hold about 1.0 GB more;
    # the capacity the module sets keeps it within a few dozen MiB. A user's value is kept.
    assert grown_mib() < 250
    assert grown_mib(ONEDNN_PRIMITIVE_CACHE_CAPACITY="1024", LRU_CACHE_CAPACITY="1024") > 600
