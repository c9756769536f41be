"""--sampler: the curriculum's arithmetic by hand, the keys the envs declare, the samplers'
draws and state, and a resumed run that draws what an uninterrupted one drew."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import gymnasium as gym
import pytest

from envs.base import TaskEnv
from envs.verify.verdict import Verdict
from learner.training import task_sampler as ts
from tasks import Task
from tasks.pack import Manifest, Pack
from tests import learner_helpers as h


def test_key_weight_is_the_chance_of_a_mixed_group_per_token():
    # p = 0.5, G = 8: 1 - 2 / 256 = 0.9921875; + eps 0.02, over 10 tokens.
    assert ts.key_weight(0.5, 8, 10.0) == pytest.approx(1.0121875 / 10)
    # p = 0.25, G = 2: 1 - 0.0625 - 0.5625 = 0.375.
    assert ts.key_weight(0.25, 2, 1.0, eps=0.0) == pytest.approx(0.375)
    # Solved or hopeless: only eps is left, and a costlier key weighs less.
    assert ts.key_weight(1.0, 8, 4.0) == pytest.approx(0.005)
    assert ts.key_weight(0.0, 8, 2.0) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="positive tokens"):
        ts.key_weight(0.5, 8, 0.0)


def test_pass_rate_is_smoothed_and_shares_keep_a_floor():
    assert ts.pass_rate(3, 8) == pytest.approx(3.5 / 9)  # Jeffreys: (3 + .5) / (8 + 1)
    assert ts.pass_rate(0, 0) == 0.5  # never seen
    # 80% by weight (1:3), 20% evenly: 0.8 * 0.25 + 0.1, 0.8 * 0.75 + 0.1.
    assert ts.key_shares([1.0, 3.0], floor=0.2) == pytest.approx([0.3, 0.7])
    # A key whose weight is next to nothing still has floor / K.
    shares = ts.key_shares([1e-9, 1.0, 1.0, 1.0], floor=0.04)
    assert shares[0] == pytest.approx(0.01, abs=1e-6) and sum(shares) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ts.key_shares([])


def test_mix_metrics_by_hand():
    m = ts.mix_metrics(["L1", "L1", "L2", "L3"], [True, False, True, False], tokens=2000,
                       episodes=32, pass_rates={"L1": 0.25, "L4": 0.5})
    assert m["signal/groups"] == 2
    assert m["signal/per_episode"] == pytest.approx(2 / 32)
    assert m["signal/per_1k_tokens"] == pytest.approx(1.0)
    assert (m["mix/L1"], m["mix/L2"], m["mix/L3"], m["mix/L4"]) == (0.5, 0.25, 0.25, 0.0)
    assert m["pass_rate/L1"] == 0.25 and m["pass_rate/L4"] == 0.5


# -- the keys envs and packs declare ------------------------------------------------------------
def test_envs_declare_levels_families_and_subjects():
    arith = gym.make("grpo/MathExact-v0", pack="arith").unwrapped
    assert arith.curriculum_keys() == ["L1", "L2", "L3", "L4", "L5", "L6"]
    train5 = arith.pack.task_at("train", 5)  # index 5 of 6 levels in turn: level 6
    assert (train5.id, arith.curriculum_key(train5)) == ("arith/L6-5", "L6")
    assert arith.curriculum_key(arith.pack.get("arith/test-L3-0")) == "L3"
    assert gym.make("grpo/MathExact-v0", pack="arith", level=2).unwrapped.curriculum_keys() \
        == ["L2"]
    extract = gym.make("grpo/JsonSchema-v0", pack="extract").unwrapped
    keys = extract.curriculum_keys()
    assert len(keys) == 20 and "L2-orders" in keys  # 4 levels x 5 families
    task = extract.pack.task_at("train", 7)
    assert extract.curriculum_key(task) == f"L{task['level']}-{task['family']}"
    pyfunc = gym.make("grpo/CodeTests-v0", pack="pyfunc").unwrapped
    assert pyfunc.curriculum_keys() == ["L1", "L2", "L3", "L4", "L5", "L6"]
    # MATH's records carry their subject; GSM8K declares no keys (a per-task pool then).
    assert arith.curriculum_key(Task("math/x", "train", {"subject": "Geometry"})) == "Geometry"
    assert gym.make("grpo/MathExact-v0", pack="gsm8k").unwrapped.curriculum_keys() is None


def test_reasoning_gym_keys_name_the_task_and_level():
    env = gym.make("grpo/ReasoningGym-v0", task="chain_sum", level=2).unwrapped
    assert env.curriculum_keys() == ["chain_sum-L2"]
    assert env.curriculum_key(env.pack.task_at("train", 3)) == "chain_sum-L2"


# -- the samplers --------------------------------------------------------------------------------
def all_levels() -> h.ShortEnv:
    return h.ShortEnv(level=None)


def test_curriculum_shares_by_hand_after_one_update():
    s = ts.build_sampler("curriculum", all_levels(), seed=0, group_size=2)
    ids = s.sample(12)
    l1 = next(i for i in ids if "/L1-" in i)
    s.update([l1, l1], [1.0, 1.0], [10.0, 10.0])
    # L1: p = 2.5 / 3, w = (1 - 25/36 - 1/36 + 0.02) / 10; never seen: p = .5, the mean cost
    # 10, w = (0.5 + 0.02) / 10. Shares: 0.95 by weight, 0.05 / 6 each.
    w1, w = (10 / 36 + 0.02) / 10, 0.052
    total = w1 + 5 * w
    shares = s.shares()
    assert shares["L1"] == pytest.approx(0.95 * w1 / total + 0.05 / 6, abs=1e-9)
    assert shares["L4"] == pytest.approx(0.95 * w / total + 0.05 / 6, abs=1e-9)
    assert round(shares["L1"], 4) == 0.1060 and round(shares["L4"], 4) == 0.1788
    assert s.pass_rates()["L1"] == pytest.approx(2.5 / 3)


def test_each_key_draws_its_own_tasks_in_the_streams_order():
    env = all_levels()
    s = ts.build_sampler("uniform", env, seed=3, group_size=4)
    assert s.shares() == {f"L{i}": pytest.approx(1 / 6) for i in range(1, 7)}
    tasks = s.take(60)
    for key in {env.curriculum_key(t) for t in tasks}:
        mine = [t.id for t in tasks if env.curriculum_key(t) == key]
        assert len(set(mine)) == len(mine)  # a key never repeats a task
    assert len({env.curriculum_key(t) for t in tasks}) == 6
    again = ts.build_sampler("uniform", all_levels(), seed=3, group_size=4).sample(60)
    assert again == [t.id for t in tasks]  # seeded
    other = ts.build_sampler("uniform", all_levels(), seed=4, group_size=4).sample(60)
    assert other != again


def test_a_hopeless_and_a_solved_level_are_drawn_less_than_a_mixed_one():
    env = all_levels()
    s = ts.build_sampler("curriculum", env, seed=0, group_size=8)
    for _ in range(5):
        tasks = s.take(24)
        ids, rewards, costs = [], [], []
        for t in tasks:
            level = env.curriculum_key(t)
            for j in range(8):
                ids.append(t.id)
                # L1 always right, L6 never, every other level half the time.
                rewards.append(1.0 if level == "L1" else 0.0 if level == "L6" else j % 2)
                costs.append(20.0)
        s.update(ids, rewards, costs)
    shares = s.shares()
    assert shares["L1"] < shares["L3"] and shares["L6"] < shares["L3"]
    assert shares["L1"] >= 0.05 / 6 and shares["L6"] >= 0.05 / 6  # the floor
    drawn = [env.curriculum_key(t) for t in s.take(600)]
    assert drawn.count("L1") < drawn.count("L3") / 3


@pytest.mark.parametrize("name", ["sequential", "uniform", "curriculum"])
def test_the_state_round_trips_through_json(name):
    a = ts.build_sampler(name, all_levels(), seed=1, group_size=4)
    ids = a.sample(5)
    a.update([i for i in ids for _ in range(4)], [1.0, 0.0, 0.0, 0.0] * 5, [7.0] * 20)
    state = json.loads(json.dumps(a.state_dict()))
    b = ts.build_sampler(name, all_levels(), seed=1, group_size=4)
    b.load_state_dict(state)
    assert b.shares() == a.shares() and b.pass_rates() == a.pass_rates()
    assert b.sample(9) == a.sample(9)


def test_a_checkpoint_of_another_sampler_is_refused_in_one_line():
    state = ts.build_sampler("curriculum", all_levels(), 0, 4).state_dict()
    with pytest.raises(ts.SamplerStateError, match="--sampler curriculum: resume with"):
        ts.build_sampler("sequential", all_levels(), 0, 4).load_state_dict(state)
    one_level = ts.build_sampler("curriculum", h.ShortEnv(level=2), 0, 4)
    with pytest.raises(ts.SamplerStateError, match="same --env-kwargs"):
        one_level.load_state_dict(state)


class ListEnv(TaskEnv):
    """A finite pack without curriculum keys."""

    default_weights: ClassVar[dict[str, float]] = {"correct": 1.0}

    def __init__(self, **kwargs: Any):
        raw = {"name": "few", "version": "1", "description": "d", "license": "l", "source": "s",
               "env": "none", "prompt_template": "{q}",
               "splits": {"train": "train.jsonl", "test": "test.jsonl"}}
        records = {"train": [{"id": str(i), "q": f"q{i}"} for i in range(40)],
                   "test": [{"id": "t0", "q": "t"}]}
        super().__init__(pack=Pack(Manifest.from_dict(raw, root=None, origin="test"), records),
                         **kwargs)

    def grade(self, task: Task, completion: str) -> tuple[dict[str, float], Verdict]:
        return {"correct": 0.0}, Verdict.fail("not_equal")


def test_without_keys_the_curriculum_revisits_tasks_it_has_seen():
    env = ListEnv()
    assert env.curriculum_keys() is None
    s = ts.build_sampler("curriculum", env, seed=0, group_size=4)
    assert isinstance(s, ts.PoolSampler)
    first = s.sample(8)
    assert {s.group_key(i) for i in first} == {"new"}  # nothing seen yet
    s.update([i for i in first for _ in range(4)], [1.0, 0.0, 0.0, 1.0] * 8, [5.0] * 32)
    later = s.sample(40)
    revisits = [i for i in later if s.group_key(i) == "revisit"]
    assert revisits and set(revisits) <= set(first)
    assert 10 <= len(revisits) <= 30  # POOL_SHARE of the draws, give or take
    state = json.loads(json.dumps(s.state_dict()))
    other = ts.build_sampler("curriculum", ListEnv(), seed=0, group_size=4)
    other.load_state_dict(state)
    assert other.sample(6) == s.sample(6)
    # Uniform without keys is the seeded stream, as sequential.
    assert ts.build_sampler("uniform", env, 0, 4).sample(5) == \
        ts.build_sampler("sequential", env, 0, 4).sample(5)


def test_the_flag_is_parsed_recorded_and_checked(capsys):
    from learner.config import Config, parse_config

    c = parse_config(["--sampler", "curriculum", "--env-recipe", "off"])
    assert c.sampler == "curriculum" and c.to_dict()["sampler"] == "curriculum"
    assert Config.from_dict(c.to_dict()).sampler == "curriculum"
    assert parse_config(["--env-recipe", "off"]).sampler == "sequential"
    with pytest.raises(SystemExit):
        parse_config(["--sampler", "hardest"])
    err = capsys.readouterr().err
    assert "--sampler" in err and "invalid choice" in err and len(err.splitlines()) == 2


# -- through the trainer ---------------------------------------------------------------------
def trainer(tmp_path, **overrides: Any):
    from learner.training.trainer import GRPOTrainer

    cfg = h.config(tmp_path, sampler="curriculum", prompts_per_step=3, group_size=2,
                   max_new_tokens=4, eval=False, **overrides)
    return GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=all_levels())


def drawn_ids(run_dir) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec["step"], []).append(rec["task_id"])
    return out


def test_a_resumed_run_draws_the_same_mix_as_an_uninterrupted_one(tmp_path):
    from learner import run_layout
    from learner.training.run_log import read_metrics

    full = trainer(tmp_path / "full", steps=4)
    full.train()
    full.close()
    part = trainer(tmp_path / "part", steps=2)
    part.train()  # saves its last step
    part.close()
    saved = run_layout.latest(tmp_path / "part/run")
    assert saved is not None
    state = json.loads((saved / run_layout.STATE_FILE).read_text())
    assert state["sampler"]["kind"] == "curriculum" and "rng" in state["sampler"]
    resumed = trainer(tmp_path / "part", steps=4, resume=True)
    resumed.train()
    resumed.close()
    want, got = drawn_ids(tmp_path / "full/run"), drawn_ids(tmp_path / "part/run")
    assert want == got and sorted(got) == [1, 2, 3, 4]
    assert len({t.split("/")[1].split("-")[0] for ids in got.values() for t in ids}) > 1
    rows = read_metrics(tmp_path / "part/run")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for a, b in zip(read_metrics(tmp_path / "full/run"), rows, strict=True):
        mix = {k: v for k, v in a.items() if k.startswith(("mix/", "pass_rate/", "signal/"))}
        assert mix and mix == {k: b[k] for k in mix}
    assert sum(v for k, v in rows[-1].items() if k.startswith("mix/")) == pytest.approx(1.0)


def test_the_plots_draw_the_mix_and_pass_rates(tmp_path):
    from learner.plot import plot

    rows = [{"step": s, "reward/mean": 0.1, "mix/L1": 0.5 - 0.1 * s, "mix/L2": 0.5 + 0.1 * s,
             "pass_rate/L1": 0.9, "pass_rate/L2": 0.2 + 0.1 * s, "signal/per_episode": 0.01,
             "signal/per_1k_tokens": 0.3} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    names = {p.name for p in plot(tmp_path)}
    assert {"curriculum_mix.png", "curriculum_pass_rate.png", "signal_groups.png",
            "signal_per_1k_tokens.png"} <= names
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.1}) + "\n")
    assert "curriculum_mix.png" not in {p.name for p in plot(tmp_path, tmp_path / "other")}
