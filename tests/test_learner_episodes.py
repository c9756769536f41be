"""Multi-turn episodes: token-in/token-out, masks, limits, infrastructure failures, the CLI."""

import copy
import json

import pytest
import torch

from learner.model import load_model, load_tokenizer
from learner.sampling.chat import ChatBridge, TemplateError
from learner.sampling.decoding import eos_ids
from learner.sampling.engine import HFEngine
from learner.sampling.episodes import run_episodes
from learner.training.batching import select_rows
from learner.training.forward import completion_logprobs
from tests import learner_helpers as h
from tests.episode_helpers import SHOUT_ENV_ID, ShoutEnv, register


def _tasks(env, n=2):
    return [env.pack.task_at("train", i) for i in range(n)]


def _episodes(model, tok, env, n=2, group=3, **kw):
    tasks = _tasks(env, n)
    kw.setdefault("max_new_tokens", 10)
    return tasks, run_episodes(HFEngine(model), tok, env, tasks, [env.prompt(t) for t in tasks],
                               group_size=group, **kw)


def test_bridge_closes_the_turn_carries_the_tool_output_and_opens_the_next():
    tok = h.tokenizer()
    bridge = ChatBridge(tok)
    assert bridge.role == "tool"  # SmolLM2's ChatML template renders any role
    assert bridge.text("82\n") == "<|im_end|>\n<|im_start|>tool\n82\n<|im_end|>\n" \
                                  "<|im_start|>assistant\n"
    eos = tok.eos_token_id
    after_eos = tok.decode(bridge.tokens("82\n", eos, [eos]))
    assert after_eos == "\n<|im_start|>tool\n82\n<|im_end|>\n<|im_start|>assistant\n"


def test_bridge_falls_back_to_the_user_role_and_refuses_a_template_without_turns():
    strict = copy.deepcopy(h.tokenizer())
    # A template that, like Gemma's, raises on any role but user and assistant.
    strict.chat_template = (
        "{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('unknown role ' + m['role']) }}{% endif %}"
        "<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")
    bridge = ChatBridge(strict)
    assert bridge.role == "user"
    assert bridge.text("82") == "</s><user>82</s><assistant>"
    mute = copy.deepcopy(h.tokenizer())
    mute.chat_template = "{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}" \
                         "{% endif %}{% endfor %}"
    with pytest.raises(TemplateError, match="cannot carry a multi-turn episode"):
        ChatBridge(mute)


def test_generation_logprobs_equal_the_loss_logprobs_on_multi_turn_rows(tmp_path):
    """Token-in/token-out: the loss passes score exactly the sampled tokens in the context they
    were sampled in, observations included, with a model loaded by from_pretrained."""
    path = h.save_tiny(tmp_path / "tiny")
    model, tok = load_model(str(path)), load_tokenizer(str(path))
    env = ShoutEnv(max_turns=3)
    torch.manual_seed(0)
    temperature, top_p = 0.7, 0.9
    _, eps = _episodes(model, tok, env, temperature=temperature, top_p=top_p)
    roll = eps.rollout
    action, mask = roll.action_mask, roll.completion_mask
    # Multi-turn rows: policy tokens after an observation (a 0 inside the row's action mask).
    inner_obs = [(a[m.bool()] == 0).any() and a[m.bool()][-1] == 1 for a, m in zip(action, mask, strict=True)]
    assert sum(map(bool, inner_obs)) >= 2
    assert all("tool" in [t["role"] for t in tr] for tr in roll.transcripts)
    groups = torch.arange(len(roll.texts)) // 3
    for share in (True, False):
        # The loss passes' own log-probs (length buckets, shared prompts), not a re-derivation.
        with torch.no_grad():
            logp, _ = completion_logprobs(model, roll.prompt_ids, roll.prompt_mask,
                                          roll.completion_ids, mask, groups,
                                          temperature=temperature, top_p=top_p,
                                          share_prompts=share)
        own = action.bool()
        assert (roll.logprobs[~own] == 0).all()  # observations were not sampled
        assert torch.allclose(logp[own], roll.logprobs[own], atol=2e-4), \
            (share, (logp[own] - roll.logprobs[own]).abs().max())
    # The loss trains on the policy's tokens only: observations are attended to, never trained.
    rows = select_rows(roll, torch.ones(len(roll.texts), dtype=torch.bool),
                       torch.ones(len(roll.texts)), mask_truncated=False)
    assert torch.equal(rows.loss_mask, action)
    assert int(rows.loss_mask.sum()) < int(mask.sum())
    observed = tok.decode(roll.completion_ids[0][(action[0] == 0) & (mask[0] == 1)])
    assert roll.transcripts[0][2]["content"] in observed


def _turns(row_ids, row_action):
    """The row's policy turns: the runs of its action mask."""
    turns, current = [], []
    for tok, own in zip(row_ids.tolist(), row_action.tolist(), strict=True):
        if own:
            current.append(tok)
        elif current:
            turns, current = [*turns, current], []
    return turns + ([current] if current else [])


def test_turn_stops_at_the_tool_calls_end_and_the_turn_limit_truncates():
    tok = h.tokenizer()
    env = ShoutEnv(max_turns=2)
    torch.manual_seed(1)
    _, eps = _episodes(h.model(), tok, env, max_new_tokens=16)
    roll = eps.rollout
    eos = set(eos_ids(h.model(), tok).tolist())
    limited = 0
    for i, info in enumerate(eps.scores.infos):
        turns = _turns(roll.completion_ids[i], roll.action_mask[i])
        assert info["turns"] == len(turns) <= 2
        for turn in turns[:-1]:  # each called the tool: cut at the token completing the call
            assert env.tool_call_end(tok.decode(turn)) is not None
            assert env.tool_call_end(tok.decode(turn[:-1])) is None
            assert not set(turn) & eos
        if len(turns) == 2 and env.tool_call_end(tok.decode(turns[-1])) is not None:
            limited += 1  # a call on the last allowed turn: the env truncated the episode
            assert bool(roll.truncated[i]) and info["truncated_turns"] == 1
    assert limited > 0


def test_episode_token_budget_bounds_the_completion_and_marks_truncation():
    env = ShoutEnv(max_turns=4)
    torch.manual_seed(2)
    _, free = _episodes(h.model(), h.tokenizer(), env, max_new_tokens=10)
    budget = 30
    torch.manual_seed(2)
    _, capped = _episodes(h.model(), h.tokenizer(), env, max_new_tokens=10,
                          max_episode_tokens=budget)
    assert int(free.rollout.lengths.max()) > budget  # the budget binds in this test
    assert int(capped.rollout.lengths.max()) <= budget
    assert capped.rollout.truncated[free.rollout.lengths > budget].all()
    assert all(info.get("rewards") for info in capped.scores.infos)  # every episode graded
    # An observation that leaves no room for another turn closes the episode (graded on an
    # empty final turn); the transcript ends with that tool output.
    closed = [tr[-1]["role"] == "tool" for tr in capped.rollout.transcripts]
    assert any(closed)
    assert all(bool(capped.rollout.truncated[i]) for i, c in enumerate(closed) if c)


def test_an_infrastructure_failure_mid_episode_is_dropped_not_scored(tmp_path):
    from learner.training.trainer import GRPOTrainer

    env = ShoutEnv(max_turns=3, fail_every=3)
    cfg = h.config(tmp_path, steps=1, eval=False, max_new_tokens=10, group_size=4)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=env)
    step = t.train_step()
    infra = ~step.samples.graded
    assert 0 < int(infra.sum()) < len(infra)
    assert step.metrics["samples/infra_errors"] == step.infra_errors == int(infra.sum())
    assert (step.advantages[infra] == 0).all()
    for i in infra.nonzero().squeeze(-1).tolist():
        assert step.samples.scores.infos[i]["reason"] == "sandbox_error"
    assert torch.isfinite(torch.tensor(step.metrics["reward/mean"]))


def test_cli_trains_multi_turn_and_logs_tool_metrics_and_transcripts(tmp_path):
    from learner import plot, run

    register()
    path = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    code = run.main(["--env", SHOUT_ENV_ID, "--model", str(path), "--max-turns", "3",
                     "--steps", "2", "--prompts-per-step", "2", "--group-size", "3",
                     "--max-new-tokens", "10", "--max-episode-tokens", "60",
                     "--eval-size", "2", "--eval-batch-size", "2", "--no-eval-perturbations",
                     "--samples-every", "1", "--output-dir", str(out), "--no-progress",
                     "--num-threads", "1", "--learning-rate", "1e-3"])
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    step = rows[-1]
    for key in ("turns/mean", "tool/calls_mean", "tool/use_frac", "tool/error_frac", "tool/s",
                "completion/policy_len_mean"):
        assert key in step, key
    assert step["turns/mean"] > 1 and step["tool/calls_mean"] > 0
    assert step["completion/policy_len_mean"] < step["completion/len_mean"]
    assert "eval/accuracy" in step and step["loss"] is not None
    sample = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    roles = [t["role"] for t in sample["transcripts"][0]]
    assert roles[:3] == ["user", "assistant", "tool"]
    assert json.loads((out / "config.json").read_text())["max_turns"] == 3
    names = {p.name for p in plot.plot(out)}
    assert "tool_use.png" in names


def test_max_turns_flag_errors_are_one_clear_line(tmp_path, capsys):
    from learner import run

    register()
    with pytest.raises(SystemExit):
        run.main(["--env", SHOUT_ENV_ID, "--env-kwargs", '{"max_turns": 2}', "--max-turns", "3"])
    assert "--max-turns 3 contradicts max_turns 2" in capsys.readouterr().err
    code = run.main(["--env", "grpo/MathExact-v0", "--max-turns", "3",
                     "--output-dir", str(tmp_path / "x")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_turns" in err[0]


def test_eval_samples_multi_turn_envs_and_shows_flagged_transcripts(tmp_path):
    from learner.evaluation.heldout import evaluate, sample
    from learner.evaluation.report import render_html

    env = ShoutEnv(max_turns=3)
    tasks = [env.pack.task_at("test", i) for i in range(2)]
    torch.manual_seed(0)
    rows = sample(h.model(), h.tokenizer(), env, tasks, group_size=2, max_new_tokens=10)
    assert len(rows) == 4 and all(r["transcript"][0]["role"] == "user" for r in rows)
    assert all(r["turns"] >= 1 for r in rows)
    result = evaluate(h.model(), h.tokenizer(), env, tasks, max_new_tokens=10, k=2)
    assert "pass@2" in result.metrics()
    flagged = {"task_id": rows[0]["task_id"], "reward": 1.0, "rewards": {}, "source": "greedy",
               "flags": [{"reason": "no_reasoning", "detail": ""}],
               "transcript": rows[0]["transcript"]}
    from learner.evaluation.gates import group_variance, heldout_accuracy, reward_distribution

    accuracy, passk = heldout_accuracy(rows, rows, 2)
    report = {"metadata": {}, "accuracy": accuracy, "pass_at_k": passk,
              "group_variance": group_variance(rows),
              "reward_distribution": reward_distribution(rows, ["short", "digit"]), "timing": {},
              "flagged": {"n_flagged": 1, "n_high_reward": 1, "min_reward": 0.5,
                          "n_checked": 4, "by_reason": {}, "samples": [flagged]}}
    html = render_html(report, {})
    for turn in rows[0]["transcript"]:
        assert f"<b>{turn['role']}</b>" in html


def test_eval_cli_reports_on_a_multi_turn_run(tmp_path):
    from learner import eval as eval_cli
    from learner import run

    register()
    path = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    assert run.main(["--env", SHOUT_ENV_ID, "--model", str(path), "--max-turns", "2",
                     "--steps", "1", "--prompts-per-step", "2", "--group-size", "2",
                     "--max-new-tokens", "8", "--no-eval", "--samples-every", "0",
                     "--output-dir", str(out), "--no-progress", "--num-threads", "1"]) == 0
    assert eval_cli.main(["--run", str(out), "--limit", "2", "--group-size", "2",
                          "--max-new-tokens", "8", "--general-limit", "0",
                          "--no-perturbations", "--output-dir", str(tmp_path / "eval")]) == 0
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert "pass@2" in report["pass_at_k"] and report["accuracy"]["n"] == 2
    greedy = report["episodes"]["greedy"]
    assert greedy["n"] == 2 and 1 <= greedy["turns_mean"] <= 2
    assert 0 <= greedy["tool_use"] <= 1
    samples = [json.loads(x) for x in (tmp_path / "eval" / "samples.jsonl").read_text()
               .splitlines()]
    # The run's --max-turns holds in the evaluation: episodes of up to two turns.
    assert max(s["turns"] for s in samples) == 2
    assert all(s["transcript"][0]["role"] == "user" for s in samples)


def test_real_math_python_episodes_with_a_model_that_learned_to_call_the_tool(tmp_path, sandbox):
    """The learner against grpo/MathPython-v0 and the real sandbox: a tiny model taught one
    tool-using transcript (a python call, then the boxed sum) reproduces it; the call runs, its
    output comes back as a tool turn, the answer is graded, and the log-probs still match."""
    import gymnasium as gym

    import envs  # noqa: F401
    from learner.model import chat_prompt

    env = gym.make("grpo/MathPython-v0", pack="arith", level=2, max_turns=3,
                   sandbox=sandbox).unwrapped
    task = env.pack.task_at("test", 0)
    call = f"Let me compute.\n```python\nprint({task['expression']})\n```"
    answer = f"\\boxed{{{task['answer']}}}"
    observation = env.episode(task).step(call)[0]
    assert task["answer"] in observation
    tok = h.tokenizer()
    model = load_model(str(h.save_tiny(tmp_path / "tiny")))
    eos = tok.eos_token_id
    prompt = tok(chat_prompt(tok, env.prompt(task)), add_special_tokens=False)["input_ids"]
    turn1 = tok(call, add_special_tokens=False)["input_ids"]
    obs = ChatBridge(tok).tokens(observation, turn1[-1], [eos])
    turn2 = tok(answer, add_special_tokens=False)["input_ids"] + [eos]
    ids = torch.tensor([prompt + turn1 + obs + turn2])
    labels = torch.tensor([[-100] * len(prompt) + turn1 + [-100] * len(obs) + turn2])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    targets = labels[0, 1:] != -100
    for _ in range(300):  # memorise the two policy turns (the tiny model starts random)
        out = model(input_ids=ids, labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        # Greedy decoding needs only the argmax right, with a margin.
        if float(out.loss.detach()) < 0.05 and torch.equal(
                out.logits[0, :-1].argmax(-1)[targets], labels[0, 1:][targets]):
            break
    eps = run_episodes(HFEngine(model), tok, env, [task], [env.prompt(task)], group_size=1,
                       max_new_tokens=len(turn1) + 8, greedy=True)
    transcript = eps.rollout.transcripts[0]
    assert [t["role"] for t in transcript] == ["user", "assistant", "tool", "assistant"]
    assert transcript[1]["content"] == call  # stopped at the token closing the call
    assert transcript[2]["content"] == observation
    assert transcript[3]["content"] == answer
    info = eps.scores.infos[0]
    assert eps.scores.passed == [True] and info["turns"] == 2 and info["tool_calls"] == 1
    assert eps.rollout.completion_ids[0].tolist() == turn1 + obs + turn2
    assert eps.rollout.action_mask[0].tolist() == [1] * len(turn1) + [0] * len(obs) + [1] * len(
        turn2)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, eps.rollout.prompt_ids, eps.rollout.prompt_mask,
                                      eps.rollout.completion_ids, eps.rollout.completion_mask)
    logp = logp[0]
    own = eps.rollout.action_mask[0].bool()
    assert torch.allclose(logp[own], eps.rollout.logprobs[0][own], atol=2e-4)
