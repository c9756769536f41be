"""eval.json over OpenEnv's evaluation protocol (openenv.core.evals): our harness runs
learner.eval and OpenEnv's ``EvalResult`` carries eval.json as its scores. OpenEnv's env server
has no evaluation route, so nothing is served over HTTP."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv", reason='pip install -e ".[openenv]"')

from openenv.core.evals import EvalConfig, EvalResult  # noqa: E402

from learner.evaluation.openenv_harness import (  # noqa: E402
    GrpoGymHarness,
    HarnessError,
    as_openenv_result,
)
from learner.evaluation.result_shape import SHAPE, load_result  # noqa: E402
from tests import learner_helpers as h  # noqa: E402


def test_the_harness_returns_eval_json_as_openenvs_result(tmp_path):
    model = h.save_tiny(tmp_path / "tiny")
    config = EvalConfig(
        harness_name="GrpoGymHarness", harness_version=SHAPE, library_versions={},
        dataset="grpo/MathExact-v0",
        eval_parameters={"env_kwargs": {"pack": "arith", "level": 1}, "model": str(model),
                         "limit": 2, "samples_per_task": 2, "pass_k": [1, 2],
                         "max_new_tokens": 4, "output_dir": str(tmp_path / "out")})
    result = GrpoGymHarness().run_from_config(config)
    assert isinstance(result, EvalResult) and result.config == config
    written = load_result(tmp_path / "out")
    assert result.scores == written
    assert set(result.scores["pass_at_k"]) == {"pass@1", "pass@2"}
    assert [r["n"] for r in result.scores["tasks"]] == [2, 2]
    # An existing eval.json, wrapped the same way, survives OpenEnv's own (strict) models.
    wrapped = as_openenv_result(tmp_path / "out")
    again = EvalResult.model_validate_json(wrapped.model_dump_json())
    assert again.scores == written and again.config.dataset == "grpo/MathExact-v0"
    assert again.config.eval_parameters["pass_k"] == [1, 2]
    assert again.config.eval_parameters["samples_per_task"] == 2
    assert "torch" in again.config.library_versions


def test_the_harness_refuses_what_learner_eval_cannot_take(tmp_path):
    with pytest.raises(HarnessError, match=r"unknown eval_parameters \['epochs'\]"):
        GrpoGymHarness().run("1", {}, "grpo/MathExact-v0", {"epochs": 3})
    # learner.eval's own one-line error comes back (a flag error: before torch loads).
    with pytest.raises(HarnessError, match="exited 2 for grpo/MathExact-v0: python -m "
                       "learner.eval: error: argument --limit: must be a whole number >= 0"):
        GrpoGymHarness().run("1", {}, "grpo/MathExact-v0",
                             {"limit": -1, "output_dir": str(tmp_path)})
