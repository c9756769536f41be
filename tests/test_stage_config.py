"""Each stage takes its part of the configuration (``learner.stage_config``): built from the
run's ``Config`` in one place, with the flags' values as the run resolved them, frozen, and what
the stages' entry points are typed with."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from learner.config import Config, field_types
from learner.stage_config import (
    CheckpointConfig,
    EngineConfig,
    EvalConfig,
    SamplingConfig,
    UpdateConfig,
)

PARTS = (SamplingConfig, EngineConfig, UpdateConfig, EvalConfig, CheckpointConfig)


def test_each_part_holds_the_configs_values_with_the_derived_ones_resolved():
    c = Config(loss_type="dr_grpo", prompts_per_step=4, group_size=8, eval_batch_size=0,
               save_every=3, keep_checkpoints=2, temperature=0.7, dynamic_sampling=True)
    update = UpdateConfig.of(c)
    # --epsilon unset: the token level's 0.2 both sides; --is-correction auto on hf: none.
    assert (update.eps_low, update.eps_high, update.is_mode) == (0.2, 0.2, "none")
    assert update.loss_type == "dr_grpo" and update.temperature == 0.7
    assert EvalConfig.of(c).eval_rows == 32  # --eval-batch-size 0: a step's P x G rows
    assert SamplingConfig.of(c).dynamic_sampling is True
    assert (CheckpointConfig.of(c).save_every, CheckpointConfig.of(c).keep_checkpoints) == (3, 2)
    assert EvalConfig.of(Config(eval_batch_size=5)).eval_rows == 5
    # A stage cannot change what the others see.
    with pytest.raises(dataclasses.FrozenInstanceError):
        update.beta = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_a_parts_fields_are_configs_fields_of_the_same_type_or_its_derived_values(part):
    flags = field_types()
    for name, hint in typing.get_type_hints(part).items():
        if name in flags:
            assert hint == flags[name], (part.__name__, name)
        else:  # a value the config derives (eps_low, is_mode, eval_rows)
            assert isinstance(getattr(Config, name, None), property), (part.__name__, name)


def test_the_stages_entry_points_take_their_part_not_the_whole_config():
    from learner.evaluation import during_training
    from learner.sampling import engine
    from learner.training import collect, policy_setup, update, vllm_sizing

    takes = {
        collect.Collector.__init__: SamplingConfig,
        engine.build_engine: EngineConfig,
        vllm_sizing.size_engine: EngineConfig,
        policy_setup.prepare_policy: UpdateConfig,
        update.PolicyUpdate.__init__: UpdateConfig,
        during_training.heldout_metrics: EvalConfig,
        during_training.run_result: EvalConfig,
    }
    for function, part in takes.items():
        hints = typing.get_type_hints(function)
        first = next(p for p in hints if p not in ("self", "return"))
        assert hints[first] is part, function.__qualname__
        assert Config not in hints.values(), function.__qualname__
