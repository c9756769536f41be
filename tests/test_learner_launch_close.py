"""``learner.launch.train`` closes the trainer and the scorer on every way out of a run: a
finished run, a stopped one (its exit status), and an unexpected error (raised on, and the
close then skips the processes' barrier, which a peer that crashed would never reach)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from learner import launch
from learner.training import trainer as trainer_module
from learner.training.stops import GradingOutage
from tests import learner_helpers as h


class FakeTrainer:
    """Stands for GRPOTrainer: ``outcome`` is what ``train`` does."""

    outcome: object = None
    closed: list[bool] = []

    def __init__(self, config, *, env, scorer, save_at_end):
        self.accelerator = SimpleNamespace(is_main_process=True, num_processes=1,
                                           device=SimpleNamespace(type="cpu"))
        self.device = self.accelerator.device  # the run's device (GRPOTrainer.device)
        self.save_at_end = save_at_end

    def train(self, resumed=None):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return {"flags": None}

    def save_model(self, path):
        path.mkdir(parents=True)

    def close(self, *, wait=True):
        FakeTrainer.closed.append(wait)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(trainer_module, "GRPOTrainer", FakeTrainer)
    FakeTrainer.closed = []
    return h.config(tmp_path, model=str(h.save_tiny(tmp_path / "tiny")), eval=False)


def test_a_finished_run_closes_with_the_barrier(fake, capsys):
    FakeTrainer.outcome = None
    assert launch.train(fake) == 0
    assert FakeTrainer.closed == [True]
    assert "metrics:" in capsys.readouterr().out


def test_a_stopped_run_closes_and_returns_its_status(fake, capsys):
    FakeTrainer.outcome = GradingOutage("the Docker engine is down", 1, 2)
    assert launch.train(fake) == 1
    assert FakeTrainer.closed == [True]
    assert "resume with:" in capsys.readouterr().err


def test_an_unexpected_error_closes_without_the_barrier_and_is_raised(fake):
    FakeTrainer.outcome = RuntimeError("a bug in a step")
    with pytest.raises(RuntimeError, match="a bug in a step"):
        launch.train(fake)
    assert FakeTrainer.closed == [False]
