"""The contract every grpo/* env shares (registration, reset/step, spaces, vector envs)."""

import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from tasks import PackError

GRPO_IDS = sorted(k for k in gym.registry if k.startswith("grpo/"))
BUILTIN_IDS = ["grpo/CodeTests-v0", "grpo/JsonSchema-v0", "grpo/MathExact-v0",
               "grpo/MathPython-v0"]
INFO_KEYS = {"task_id", "pack", "pack_version", "split"}


def make(env_id, **kwargs):
    return gym.make(env_id, **kwargs)


def needs_docker(env_id):
    return [pytest.mark.docker] if env_id == "grpo/CodeTests-v0" else []


PARAMS = [pytest.param(i, marks=needs_docker(i)) for i in BUILTIN_IDS]


def test_import_registers_every_builtin_env():
    assert set(BUILTIN_IDS) <= set(GRPO_IDS)
    assert all(envs.env_sources()[i] == "built-in" for i in BUILTIN_IDS)


@pytest.mark.parametrize("env_id", PARAMS)
def test_check_env_passes(env_id):
    env = make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("env_id", PARAMS)
def test_reset_is_deterministic_and_step_terminates(env_id):
    env = make(env_id)
    prompt_a, info_a = env.reset(seed=123)
    prompt_b, info_b = env.reset(seed=123)
    assert isinstance(prompt_a, str) and prompt_a == prompt_b
    assert info_a["task_id"] == info_b["task_id"]
    assert INFO_KEYS <= set(info_a)
    assert re.fullmatch(r"\d+\.\d+\.\d+\+[0-9a-f]{12}", info_a["pack_version"])
    picked, info = env.reset(options={"task_id": info_a["task_id"]})
    assert picked == prompt_a and info["task_id"] == info_a["task_id"]
    obs, reward, terminated, truncated, info = env.step("I do not know. Ünïcödé ∑ \\boxed{?}")
    assert obs == "" and terminated is True and truncated is False
    assert isinstance(reward, float)
    rewards = info["rewards"]
    weights = env.unwrapped.reward_weights
    assert set(rewards) == set(weights)
    assert reward == pytest.approx(sum(weights[k] * v for k, v in rewards.items()))
    assert "reason" in info and info["grading_s"] >= 0
    with pytest.raises(envs.EpisodeError, match="reset"):
        env.step("again")
    env.close()


def test_math_exact_grades_gsm8k_zero():
    env = make("grpo/MathExact-v0", pack="gsm8k", split="test")  # gsm8k/0 is a test task
    prompt, info = env.reset(seed=0)
    assert "\\boxed" in prompt and info["pack"] == "gsm8k"
    assert env.reset(options={"task_id": "gsm8k/0"})[1]["split"] == "test"
    _, reward, *_, info = env.step("16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars. \\boxed{18}")
    assert info["rewards"] == {"correct": 1.0, "format": 1.0}
    assert reward == pytest.approx(1.1)
    env.reset(options={"task_id": "gsm8k/0"})
    _, reward, *_, info = env.step("\\boxed{17}")
    assert info["rewards"]["correct"] == 0.0 and info["reason"] == "not_equal"
    env.reset(options={"task_id": "gsm8k/0"})
    *_, info = env.step("The answer is 18.")
    assert info["rewards"] == {"correct": 1.0, "format": 0.0}


def test_a_train_env_refuses_a_test_task_by_id_in_one_line():
    train = make("grpo/MathExact-v0", pack="gsm8k", split="train")
    with pytest.raises(PackError) as refused:
        train.reset(options={"task_id": "gsm8k/0"})
    message = str(refused.value)
    assert "\n" not in message and "'gsm8k/0' is in split 'test'" in message
    assert "split='test'" in message and "split='all'" in message
    first_train = train.unwrapped.pack.task_at("train", 0).id
    assert train.reset(options={"task_id": first_train})[1]["split"] == "train"
    # A procedural pack's test ids too; grading by id (score) is not handing a task out.
    arith = make("grpo/MathExact-v0", pack="arith", level=1)
    test_id = arith.unwrapped.pack.task_at("test", 0).id
    with pytest.raises(PackError, match="in split 'test'"):
        arith.reset(options={"task_id": test_id})
    assert arith.unwrapped.score(test_id, "\\boxed{x}")[1]["reason"]
    # split="all" serves any split by id, and draws none.
    anywhere = make("grpo/MathExact-v0", pack="gsm8k", split="all")
    assert anywhere.reset(options={"task_id": "gsm8k/0"})[1]["split"] == "test"
    assert anywhere.reset(options={"task_id": first_train})[1]["split"] == "train"
    with pytest.raises(PackError, match="by id only"):
        anywhere.reset(seed=0)


def test_reward_weights_are_env_kwargs():
    env = make("grpo/MathExact-v0", pack="arith", level=1,
               reward_weights={"correct": 2.0, "format": 0.0})
    env.reset(options={"task_id": "arith/L1-0"})
    answer = env.unwrapped.pack.get("arith/L1-0")["answer"]
    _, reward, *_ = env.step(f"\\boxed{{{answer}}}")
    assert reward == 2.0
    with pytest.raises(ValueError, match="unknown reward component"):
        make("grpo/MathExact-v0", reward_weights={"style": 1.0})


def test_bad_kwargs_fail_clearly():
    with pytest.raises(PackError, match="no split"):
        make("grpo/MathExact-v0", split="dev")
    with pytest.raises(PackError, match="unknown pack"):
        make("grpo/MathExact-v0", pack="nope")
    with pytest.raises(PackError, match="no task"):
        make("grpo/MathExact-v0").reset(options={"task_id": "gsm8k/99999"})
    with pytest.raises(TypeError, match="str"):
        env = make("grpo/MathExact-v0")
        env.reset(seed=1)
        env.unwrapped.step(b"bytes")


def test_seeds_spread_over_the_split():
    env = make("grpo/MathExact-v0", pack="gsm8k", split="test")
    ids = {env.reset(seed=s)[1]["task_id"] for s in range(30)}
    assert len(ids) > 20
    assert all(env.unwrapped.pack.get(i).split == "test" for i in ids)


def test_sync_and_async_vector_envs():
    fns = [lambda: gym.make("grpo/MathExact-v0", pack="arith", level=1)] * 2
    for vec in (gym.vector.SyncVectorEnv(fns),
                gym.vector.AsyncVectorEnv(fns, shared_memory=False)):
        prompts, infos = vec.reset(seed=[1, 2])
        assert len(prompts) == 2 and all("What is" in p for p in prompts)
        answers = [env_answer(t) for t in infos["task_id"]]
        _, rewards, terminated, truncated, infos = vec.step(
            tuple(f"\\boxed{{{a}}}" for a in answers))
        assert list(rewards) == [1.1, 1.1] and all(terminated) and not any(truncated)
        vec.close()


def env_answer(task_id):
    from tasks import load_pack

    return load_pack("arith", level=1).get(task_id)["answer"]


def test_require_boxed_credits_only_boxed_answers():
    strict = make("grpo/MathExact-v0", pack="gsm8k", require_boxed=True).unwrapped
    lenient = make("grpo/MathExact-v0", pack="gsm8k").unwrapped
    for completion, strict_correct in [("The answer is 18.", 0.0), ("#### 18", 0.0),
                                        ("so \\boxed{18}", 1.0), ("\\boxed{17}", 0.0)]:
        assert strict.score("gsm8k/0", completion)[1]["rewards"]["correct"] == strict_correct
    assert lenient.score("gsm8k/0", "The answer is 18.")[1]["rewards"]["correct"] == 1.0
    info = strict.score("gsm8k/0", "The answer is 18.")[1]
    assert info["passed"] is False and info["reason"] == "not_boxed"
