"""The one sample-and-score path (``learner.sampling.graded``): single-turn completions are
graded after the sampler closes, a multi-turn env's episodes inside it; both come back as one
rollout with the env's grades, rows task-major, as training and held-out evaluation read them."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from learner.sampling.chat import ChatBridge
from learner.sampling.engine import HFEngine
from learner.sampling.graded import sample_graded
from tests import learner_helpers as h
from tests.episode_helpers import ShoutEnv


class Watched:
    """A sampler that records whether it was open whenever the env graded."""

    def __init__(self, model):
        self.model, self.open, self.opened = model, False, 0

    @contextmanager
    def __call__(self):
        self.open, self.opened = True, self.opened + 1
        try:
            yield HFEngine(self.model)
        finally:
            self.open = False


def _watch_grading(env, sampler):
    seen = []
    score = env.score

    def recording(task, completion):
        seen.append(sampler.open)
        return score(task, completion)

    env.score = recording
    return seen


def test_single_turn_completions_are_graded_after_the_sampler_closes():
    model, tok, env = h.model(), h.tokenizer(), h.ShortEnv()
    tasks = [env.pack.task_at("train", i) for i in range(3)]
    sampler = Watched(model)
    seen = _watch_grading(env, sampler)
    graded = sample_graded(sampler, tok, env, tasks, [env.prompt(t) for t in tasks],
                           group_size=2, max_new_tokens=8, bridge=None, workers=2)
    assert sampler.opened == 1 and seen == [False] * 6  # every completion graded, once, after
    assert len(graded.rollout.texts) == 6 and graded.rollout.transcripts is None
    # Rows are task-major: row r is graded against task r // G, as env.score grades it alone.
    again = [env.score(tasks[r // 2], text)[0] for r, text in enumerate(graded.rollout.texts)]
    assert graded.scores.rewards == pytest.approx(again)
    assert graded.generate_s > 0 and graded.score_s >= 0


def test_completions_stop_where_the_env_says_the_answer_is_complete():
    model, tok = h.model(), h.tokenizer()
    tasks_of = h.ShortEnv()
    tasks = [tasks_of.pack.task_at("train", i) for i in range(2)]
    prompts = [tasks_of.prompt(t) for t in tasks]

    def texts(env):
        return sample_graded(Watched(model), tok, env, tasks, prompts, group_size=1,
                             max_new_tokens=16, greedy=True, bridge=None).rollout.texts

    whole = texts(h.ShortEnv())
    short = h.ShortEnv()
    short.answer_end = lambda text: 3 if len(text) >= 3 else None
    cut = texts(short)
    assert all(w.startswith(c) and 3 <= len(c) < len(w) for w, c in zip(whole, cut, strict=True))


def test_greedy_draws_repeat_and_a_remote_scorer_grades_instead_of_the_env():
    model, tok, env = h.model(), h.tokenizer(), h.ShortEnv()
    tasks = [env.pack.task_at("train", i) for i in range(2)]
    prompts = [env.prompt(t) for t in tasks]

    class Remote:
        calls = 0

        def score_many(self, tasks, completions):
            Remote.calls += 1
            return [(0.25, {"rewards": {"short": 0.25}, "passed": True}) for _ in completions]

    run = dict(group_size=1, max_new_tokens=6, bridge=None, greedy=True)
    first = sample_graded(Watched(model), tok, env, tasks, prompts, **run)
    remote = sample_graded(Watched(model), tok, env, tasks, prompts, scorer=Remote(), **run)
    assert remote.rollout.texts == first.rollout.texts
    assert Remote.calls == 1 and remote.scores.rewards == [0.25, 0.25]
    assert remote.scores.passed == [True, True]


def test_a_multi_turn_env_is_graded_by_its_episodes_inside_the_sampler():
    model, tok, env = h.model(), h.tokenizer(), ShoutEnv(max_turns=3)
    tasks = [env.pack.task_at("train", i) for i in range(2)]
    sampler = Watched(model)
    seen = _watch_grading(env, sampler)
    graded = sample_graded(sampler, tok, env, tasks, [env.prompt(t) for t in tasks],
                           group_size=2, max_new_tokens=16, bridge=ChatBridge(tok), workers=2)
    assert sampler.opened == 1 and seen == [True] * 4  # each episode's last step graded it
    assert graded.rollout.transcripts is not None and len(graded.rollout.transcripts) == 4
    assert all(info["turns"] >= 1 for info in graded.scores.infos)
