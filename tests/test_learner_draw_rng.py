"""The background draw's random numbers come from its own generators, never torch's global one
(which the update's dropout draws from on the other thread)."""

from __future__ import annotations

import threading

import torch

from learner.distribution import DrawGenerators, drawing_with, uniform
from learner.training.ahead import DrawAhead


def _expected(seed: int, n: int) -> torch.Tensor:
    return torch.rand(n, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_uniform_draws_from_the_threads_generators_and_leaves_the_global_one():
    torch.manual_seed(1)
    state = torch.get_rng_state()
    with drawing_with(DrawGenerators(5)):
        got = uniform(4, torch.float64, torch.device("cpu"))
    assert torch.equal(got, _expected(5, 4))
    assert torch.equal(torch.get_rng_state(), state)  # the global generator did not move
    # Outside the block it is torch.rand on the global generator.
    assert torch.equal(uniform(2, torch.float64, torch.device("cpu")), _after(state, 2))


def _after(state: torch.Tensor, n: int) -> torch.Tensor:
    g = torch.Generator()
    g.set_state(state)
    return torch.rand(n, 1, dtype=torch.float64, generator=g)


def test_another_thread_inside_the_block_does_not_change_this_ones_draws():
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with drawing_with(DrawGenerators(7)):
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    inside.wait(10)
    torch.manual_seed(3)
    mine = uniform(3, torch.float64, torch.device("cpu"))
    release.set()
    worker.join()
    torch.manual_seed(3)
    assert torch.equal(mine, torch.rand(3, 1, dtype=torch.float64))


def test_the_draw_ahead_samples_with_its_own_seeded_generators():
    ahead = DrawAhead(lambda model: uniform(3, torch.float64, torch.device("cpu")), seed=11)
    state = torch.get_rng_state()
    ahead.start(None, version=0, position=0)
    drawn = ahead.take()
    ahead.close()
    assert torch.equal(drawn.samples, _expected(11, 3))
    assert torch.equal(torch.get_rng_state(), state)
