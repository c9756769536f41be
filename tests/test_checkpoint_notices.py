"""A checkpoint of a model with tied embeddings saves without accelerate's "Removed shared
tensor" notice (loading re-ties the head, which the test checks), while the same notice for a
tensor the model does not tie still shows."""

from __future__ import annotations

import logging

import pytest
import torch
from accelerate import Accelerator

from learner.model import load_model, with_lora
from learner.training import checkpoint
from tests import learner_helpers


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def shown():
    logger = logging.getLogger(checkpoint.SHARED_TENSOR_LOGGER)
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield handler.messages
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize("lora", [False, True])
def test_a_tied_model_saves_quietly_and_reloads_tied(tmp_path, shown, lora) -> None:
    model = learner_helpers.model()
    assert model.config.tie_word_embeddings
    if lora:
        model = with_lora(model, r=4, alpha=8, dropout=0.0)
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(model)
    path = checkpoint.save(accelerator, tmp_path, 1, {"position": 0})
    assert not [m for m in shown if checkpoint.SHARED_TENSOR_NOTICE in m], shown
    if not lora:  # the head comes back as the embedding, not as a fresh random tensor
        fresh = load_model(str(learner_helpers._saved_tiny(0, 2, 64)))
        with torch.no_grad():
            fresh.get_input_embeddings().weight.add_(1.0)
        reloaded = Accelerator(cpu=True)
        fresh = reloaded.prepare(fresh)
        checkpoint.load(reloaded, path)
        head, embed = fresh.get_output_embeddings().weight, fresh.get_input_embeddings().weight
        assert head.data_ptr() == embed.data_ptr()
        assert torch.equal(embed, model.get_input_embeddings().weight)


def test_the_notice_for_an_untied_tensor_still_shows(shown) -> None:
    quiet = checkpoint._DropTiedNotice(("lm_head.weight",))
    logger = logging.getLogger(checkpoint.SHARED_TENSOR_LOGGER)
    logger.addFilter(quiet)
    try:
        for names in ({"lm_head.weight"}, {"base_model.model.lm_head.weight"},
                      {"encoder.proj.weight"}, {"lm_head.weight", "decoder.weight"}):
            logger.warning(f"[RANK 0] Removed shared tensor {names} while saving. This should be OK")
        logger.warning("Removed shared tensor {garbled while saving")
    finally:
        logger.removeFilter(quiet)
    assert shown == [
        "[RANK 0] Removed shared tensor {'encoder.proj.weight'} while saving. This should be OK",
        f"[RANK 0] Removed shared tensor {({'lm_head.weight', 'decoder.weight'})} while saving. "
        "This should be OK",
        "Removed shared tensor {garbled while saving",
    ]
