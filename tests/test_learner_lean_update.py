"""The update's memory and arithmetic: no reference model at all when beta is 0 (neither built
nor run), the reference in bf16 under bf16 autocast (``--autocast``, recorded in config.json
as the run had it), and under autocast every matmul of the loss and reference passes in bf16."""

from __future__ import annotations

import pytest
import torch
from accelerate.state import AcceleratorState
from torch.utils._python_dispatch import TorchDispatchMode

from learner.training import sharding
from learner.training.trainer import GRPOTrainer
from learner.training.update import PolicyUpdate
from tests import learner_helpers as h


@pytest.fixture(autouse=True)
def _fresh_precision():
    """accelerate's mixed precision is process-wide: each test's runs set their own."""
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _trainer(tmp_path, **overrides) -> GRPOTrainer:
    cfg = h.config(tmp_path, eval=False, **overrides)
    return GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())


def _counting(monkeypatch, owner, name):
    calls = []
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_beta_zero_builds_no_reference_and_runs_no_reference_pass(tmp_path, monkeypatch):
    copies = _counting(monkeypatch, sharding, "reference_copy")
    passes = _counting(monkeypatch, PolicyUpdate, "ref_logprobs")
    t = _trainer(tmp_path / "b0", beta=0.0)
    assert t.update.ref_model is None and copies == []
    for _ in range(2):  # the second step's policy is no longer the reference
        step = t.train_step()
    assert not step.update.skipped and t.update.version == 2
    assert passes == [] and step.update.kl is None
    # The same run with a KL term copies the policy once and runs the reference's pass.
    t = _trainer(tmp_path / "b1", beta=0.04)
    assert t.update.ref_model is not None and copies == [1]
    for _ in range(2):
        t.train_step()
    assert passes and t.update.version == 2


def test_autocast_bf16_puts_the_reference_in_bf16_and_config_records_it(tmp_path):
    t = _trainer(tmp_path / "auto", beta=0.04)  # auto on CPU: off, everything fp32
    assert t.config.autocast == "off" and t.accelerator.mixed_precision == "no"
    assert {p.dtype for p in t.update.ref_model.parameters()} == {torch.float32}
    AcceleratorState._reset_state(reset_partial_state=True)
    t = _trainer(tmp_path / "bf16", beta=0.04, autocast="bf16")
    assert t.config.autocast == "bf16" and t.config.to_dict()["autocast"] == "bf16"
    ref = t.update.ref_model
    linear = {n for n, m in ref.named_modules() if isinstance(m, torch.nn.Linear)}
    # Matmul weights in bf16; the embedding (and the tied head) and the norms as loaded.
    for name, p in ref.named_parameters():
        owner = name.rsplit(".", 1)[0]
        assert p.dtype == (torch.bfloat16 if owner in linear else torch.float32), name
    assert ref.get_input_embeddings().weight.dtype == torch.float32
    assert {p.dtype for p in t.policy.parameters()} == {torch.float32}  # master weights
    t.train_step()
    step = t.train_step()  # past the first update: the bf16 reference's pass runs
    assert not step.update.skipped and torch.isfinite(torch.tensor(step.update.kl))
    assert 0 <= step.update.kl < 0.1


class _Matmuls(TorchDispatchMode):
    """The dtypes of the matrix operands of every matmul and attention op run."""

    def __init__(self):
        super().__init__()
        self.dtypes: list[tuple[str, tuple[torch.dtype, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("mm", "addmm", "bmm", "baddbmm") or "dot_product" in name:
            tensors = [a for a in args if isinstance(a, torch.Tensor) and a.dim() >= 2]
            self.dtypes.append((name, tuple(a.dtype for a in tensors[:3])))
        return func(*args, **(kwargs or {}))


def test_under_bf16_autocast_no_matmul_of_the_update_runs_in_fp32(tmp_path):
    t = _trainer(tmp_path, beta=0.04, autocast="bf16")
    t.train_step()  # the policy moves: the next update runs the reference's pass too
    samples, advantages, batch = h.step_batch(t)
    with _Matmuls() as seen:
        stats = t.update(batch)
    assert not stats.skipped
    names = {n for n, _ in seen.dtypes}
    assert {"mm"} <= names and any("dot_product" in n for n in names)
    fp32 = [(n, d) for n, d in seen.dtypes if torch.float32 in d]
    assert fp32 == []


def test_the_trainer_turns_checkpointing_on_when_only_then_the_plan_fits(tmp_path, capsys,
                                                                        monkeypatch):
    """Free memory between the plan with checkpointing and the plan without: one line says
    so, the run has it on (config.json records it) and its steps train."""
    from learner.training import memory_plan

    real = memory_plan.within

    def squeezed(make, available, checkpointing):
        return real(make, (make(False).peak + make(True).peak) / 2, checkpointing)

    monkeypatch.setattr(memory_plan, "within", squeezed)
    cfg = h.config(tmp_path, eval=False, max_new_tokens=24, micro_batch_tokens=4096)
    t = GRPOTrainer(cfg, model=h.model(layers=6), tokenizer=h.tokenizer(), env=h.ShortEnv())
    lines = [x for x in capsys.readouterr().out.splitlines() if "checkpointing" in x]
    assert len(lines) == 1 and lines[0].startswith("note: turning on --gradient-checkpointing")
    assert t.memory_plan.checkpointing and t.config.gradient_checkpointing
    assert t.config.to_dict()["gradient_checkpointing"] is True
    assert t.policy.is_gradient_checkpointing
    step = t.train_step()
    assert not step.update.skipped and t.update.version == 1
    # With room for the plan without it, nothing is said and nothing changes.
    monkeypatch.setattr(memory_plan, "within", real)
    t = GRPOTrainer(h.config(tmp_path / "roomy", eval=False), model=h.model(),
                    tokenizer=h.tokenizer(), env=h.ShortEnv())
    assert not t.config.gradient_checkpointing and not t.policy.is_gradient_checkpointing
    assert "checkpointing" not in capsys.readouterr().out
