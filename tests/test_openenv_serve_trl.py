"""TRL's GRPOTrainer (the dev extra's trl) takes one real step on CPU whose reward comes from a
served grpo-gym env, through TRL's OpenEnv path (``environment_factory``). The model is the
repo's tiny test model, loaded with ``from_pretrained`` (``tests.learner_helpers.model``)."""

from __future__ import annotations

import functools
import warnings

import pytest

pytest.importorskip("openenv", reason='pip install -e ".[openenv]"')
pytest.importorskip("trl")

import envs  # noqa: E402,F401
from envs.tools.integrations import trl as grpo_trl  # noqa: E402,F401 - before trl: quiets its import
from envs.tools.integrations.trl_openenv import ServedEpisode, served_reward, task_dataset  # noqa: E402
from tests import learner_helpers as h  # noqa: E402
from tests.openenv_serve_helpers import served  # noqa: E402

ENV = "grpo/MathExact-v0"
ARITH = {"pack": "arith", "level": 1}


def test_one_real_trl_step_with_the_reward_from_a_served_env(tmp_path, monkeypatch):
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from learner.model import load_tokenizer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.filterwarnings("ignore")
    tokenizer = load_tokenizer()  # the embedded model's, via from_pretrained
    # TRL's environment_factory needs a template that renders tool calls; SmolLM2's drops them.
    # Qwen2.5's uses the same <|im_start|>/<|im_end|> markers, which this tokenizer has.
    tokenizer.chat_template = qwen2_5_chat_template
    config = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=12, learning_rate=1e-5, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True, seed=0)
    graded: list[float | None] = []

    def reward(completions, environments, **kwargs):
        got = served_reward(completions, environments, **kwargs)
        graded.extend(got)
        return got

    with served(ENV, ARITH) as url:
        trainer = GRPOTrainer(
            model=h.model(), processing_class=tokenizer, reward_funcs=[reward],
            environment_factory=functools.partial(ServedEpisode, url),
            train_dataset=task_dataset(url, 4), args=config)
        trainer.train()
        pool = [e for envs_ in trainer._environment_pool.values() for e in envs_]
        seen = [e._last for e in pool if e._last]
    logs = {k: v for row in trainer.state.log_history for k, v in row.items()}
    print(f"TRL step: {trainer.state.log_history[0]}")
    assert trainer.state.global_step == 1
    assert len(graded) == 4 and all(r is not None for r in graded)  # every rollout graded
    assert "rewards/reward/mean" in logs and logs["rewards/reward/mean"] == pytest.approx(
        sum(graded) / 4)
    assert seen and all(obs["done"] if "done" in obs else obs["prompt"] == "" for obs in seen)
    assert all(obs["reason"] is not None and obs["task_id"].startswith("arith/") for obs in seen)
