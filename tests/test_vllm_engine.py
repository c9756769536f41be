"""The vLLM sampling engine (the CPU build in CI): the rollout type, token-in/token-out episodes,
the weights after an update (full fine-tuning, LoRA merged and as an adapter), and the logged
engine/trainer log-prob mismatch. One engine serves the session (``conftest.vllm_engine``).

Tolerance: on CPU in fp32 the engine's log-probs and the loss passes' differ by float rounding
alone (vLLM's kernels sum in another order): within ``ATOL`` per token. Greedy completions are
compared token by token up to the first position where the trainer's two best logits are
closer than ``TIE``: there a rounding difference may pick either, which is not a bug.
"""

import pytest
import torch

from learner.model import load_model, load_tokenizer
from learner.sampling.decoding import left_pad
from learner.sampling.engine import HFEngine, engine_name
from learner.sampling.episodes import run_episodes
from learner.sampling.rollout import generate
from learner.training.forward import completion_logits, completion_logprobs
from learner.training.trainer import GRPOTrainer
from tests import learner_helpers as h
from tests.episode_helpers import ShoutEnv

ATOL = 1e-4
TIE = 1e-3
PROMPTS = ["What is 2 + 3?", "Name a colour.", "Count to five.", "Say hello."]


def _templated(tok):
    return [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                    add_generation_prompt=True) for p in PROMPTS]


def _policy(path):
    return load_model(str(path)), load_tokenizer(str(path))


def _scored(model, roll, groups, temperature, top_p):
    with torch.no_grad():
        logp, _ = completion_logprobs(model, roll.prompt_ids, roll.prompt_mask,
                                      roll.completion_ids, roll.completion_mask, groups,
                                      temperature=temperature, top_p=top_p)
    return logp


def test_auto_picks_hf_on_cpu():
    assert engine_name("auto", torch.device("cpu")) == "hf"
    assert engine_name("vllm", torch.device("cpu")) == "vllm"


def test_vllm_dtype_chooses_the_engines_precision(monkeypatch, tmp_path):
    import learner.sampling.vllm_engine as vllm_engine_module
    from learner.sampling.engine import build_engine
    from learner.stage_config import EngineConfig

    made = []
    monkeypatch.setattr(vllm_engine_module, "VLLMEngine",
                        lambda path, **kwargs: made.append(kwargs) or kwargs)
    for flag, want in (("auto", None), ("bfloat16", "bfloat16"), ("float32", "float32")):
        cfg = h.config(tmp_path, rollout_engine="vllm", vllm_dtype=flag)
        build_engine(EngineConfig.of(cfg), torch.device("cpu"))
        assert made[-1]["dtype"] == want  # None: the engine's own choice (fp32 on CPU)
    with pytest.raises(SystemExit):  # a precision vLLM does not take is refused at the flag
        from learner.config import parse_config

        parse_config(["--rollout-engine", "vllm", "--vllm-dtype", "bf16"])


def test_the_weights_go_to_the_engine_in_its_precision(vllm_engine, vllm_model):
    # vLLM would cast a float32 weight into a bf16 engine itself, but warn once per tensor on
    # every sync; sent in the engine's precision, the values are the ones it would have made.
    from learner.sampling.vllm_engine import checkpoint_weights

    assert vllm_engine.dtype == torch.float32  # the CPU default
    model, _ = _policy(vllm_model)
    plain = dict(checkpoint_weights(model))
    cast = dict(checkpoint_weights(model, dtype=torch.bfloat16))
    assert list(cast) == list(plain)
    for name, value in plain.items():
        assert cast[name].dtype == torch.bfloat16
        assert torch.equal(cast[name], value.to(torch.bfloat16)), name
    assert any(not torch.equal(cast[n].float(), plain[n]) for n in plain)  # it rounds


def test_a_vllm_rollout_is_the_rollout_type_with_the_trainers_logprobs(vllm_engine, vllm_model):
    model, tok = _policy(vllm_model)
    vllm_engine.sync(model)
    group, budget, temperature, top_p = 4, 12, 0.7, 0.9
    def draw():
        return generate(vllm_engine, tok, _templated(tok), group_size=group,
                        max_new_tokens=budget, temperature=temperature, top_p=top_p)

    # Seeded once (the run's default): vLLM draws from the device's generator, which reseed
    # restarts (in this process also torch's), so a seeded run repeats.
    vllm_engine.reseed(0)
    roll = draw()
    vllm_engine.reseed(0)
    assert torch.equal(roll.completion_ids, draw().completion_ids)
    # A seed per request (--async-steps 1), from the engine's own generator: the global one,
    # which the update draws from meanwhile, does not decide them.
    vllm_engine.seed_requests = True
    try:
        vllm_engine.reseed(0)
        seeded = draw()
        torch.manual_seed(1)
        vllm_engine._generator.manual_seed(0)  # the requests' seeds alone restart
        assert torch.equal(seeded.completion_ids, draw().completion_ids)
    finally:
        vllm_engine.seed_requests = False
    ref = generate(HFEngine(model), tok, _templated(tok), group_size=group, max_new_tokens=budget)
    assert roll.prompt_ids.shape == ref.prompt_ids.shape  # same prompts, same layout
    assert torch.equal(roll.prompt_ids, ref.prompt_ids)
    n = len(PROMPTS) * group
    assert roll.completion_ids.shape[0] == n and len(roll.texts) == n
    lengths, eos = roll.lengths, set(vllm_engine.eos_ids(tok).tolist())
    for r in range(n):  # cut at the budget, or ended by an EOS token, kept
        last = int(roll.completion_ids[r, int(lengths[r]) - 1])
        assert (bool(roll.truncated[r]) and int(lengths[r]) == budget) != (last in eos)
    cols = torch.arange(roll.completion_ids.shape[1])
    assert torch.equal(roll.completion_mask.bool(), cols < lengths.unsqueeze(-1))
    assert bool((roll.logprobs[~roll.completion_mask.bool()] == 0).all())
    assert roll.texts == tok.batch_decode([r[:k] for r, k in zip(roll.completion_ids,
                                                                  lengths.tolist(),
                                                                  strict=True)],
                                          skip_special_tokens=True)
    rows = roll.completion_ids[:, 0].view(len(PROMPTS), group)
    assert any(len(set(r.tolist())) > 1 for r in rows)  # a group's rows are sampled apart
    logp = _scored(model, roll, torch.arange(n) // group, temperature, top_p)
    own = roll.completion_mask.bool()
    assert torch.allclose(logp[own], roll.logprobs[own], atol=ATOL), \
        (logp[own] - roll.logprobs[own]).abs().max()


def test_vllm_rows_end_at_eos_kept_or_at_their_budget_as_the_loop_does(vllm_engine, vllm_model):
    """A random model rarely samples the real EOS: a large stop set stands in for it."""
    model, tok = _policy(vllm_model)
    vllm_engine.sync(model)
    ids, mask = left_pad([tok(p)["input_ids"] for p in PROMPTS], tok.pad_token_id)
    eos = torch.arange(0, 49152, 12)  # one token in 12: most rows stop within 16 tokens
    budgets = torch.tensor([16] * 8 + [5] * 8)
    out = vllm_engine.decode(ids, mask, budgets=budgets, eos=eos, pad_id=tok.pad_token_id,
                             repeat=4, temperature=1.0)
    kinds = set(out.stops)
    assert kinds == {"eos", "length"}, kinds
    for r, why in enumerate(out.stops):
        k = int(out.lengths[r])
        row = out.tokens[r].tolist()
        assert all(t == tok.pad_token_id for t in row[k:])
        if why == "eos":  # kept, and the only stop token of the row
            assert row[k - 1] in eos and not set(row[:k - 1]) & set(eos.tolist())
        else:
            assert k == int(budgets[r]) and not set(row[:k]) & set(eos.tolist())
    hf = HFEngine(model).decode(ids, mask, budgets=budgets, eos=eos, pad_id=tok.pad_token_id,
                                repeat=4, temperature=1.0)
    assert out.tokens.shape == hf.tokens.shape and len(hf.stops) == len(out.stops)


def test_multi_turn_episodes_through_vllm_are_token_in_token_out(vllm_engine, vllm_model):
    """The loss passes' log-probs equal the engine's on every policy token of multi-turn rows
    (observations between turns, never re-tokenised), and each tool-calling turn ends at the
    token that completes the call."""
    model, tok = _policy(vllm_model)
    vllm_engine.sync(model)
    env = ShoutEnv(max_turns=3)
    tasks = [env.pack.task_at("train", i) for i in range(2)]
    temperature, top_p = 0.7, 0.9
    torch.manual_seed(0)
    eps = run_episodes(vllm_engine, tok, env, tasks, [env.prompt(t) for t in tasks],
                       group_size=3, max_new_tokens=10, temperature=temperature, top_p=top_p)
    roll = eps.rollout
    action, mask = roll.action_mask.bool(), roll.completion_mask.bool()
    inner = [bool((a[m] == 0).any() and a[m][-1]) for a, m in zip(action, mask, strict=True)]
    assert sum(inner) >= 2  # rows with a policy turn after an observation
    for i, info in enumerate(eps.scores.infos):
        ids = roll.completion_ids[i][mask[i]].tolist()
        own = action[i][mask[i]].tolist()
        turns, cur = [], []
        for t, a in zip(ids, own, strict=True):
            if a:
                cur.append(t)
            elif cur:
                turns, cur = [*turns, cur], []
        turns += [cur] if cur else []
        assert info["turns"] == len(turns)
        for turn in turns[:-1]:  # a tool call, cut where it completed
            assert env.tool_call_end(tok.decode(turn, skip_special_tokens=True)) is not None
            assert env.tool_call_end(tok.decode(turn[:-1], skip_special_tokens=True)) is None
    logp = _scored(model, roll, torch.arange(len(roll.texts)) // 3, temperature, top_p)
    assert bool((roll.logprobs[~action] == 0).all())
    assert torch.allclose(logp[action], roll.logprobs[action], atol=ATOL), \
        (logp[action] - roll.logprobs[action]).abs().max()


def _greedy_agree(trainer, engine, tok, budget=16):
    """Greedy completions by the engine and by the learner's loop on the trainer's policy,
    compared up to each row's first near-tie; returns the engine's and the compared count."""
    prompts = _templated(tok)
    ours = generate(engine, tok, prompts, group_size=1, max_new_tokens=budget, greedy=True)
    theirs = generate(HFEngine(trainer.policy), tok, prompts, group_size=1,
                      max_new_tokens=budget, greedy=True)
    with torch.no_grad():
        logits = completion_logits(trainer.policy, theirs.prompt_ids, theirs.prompt_mask,
                                   theirs.completion_ids, theirs.completion_mask)
    top2 = logits.topk(2, dim=-1).values
    margin = top2[..., 0] - top2[..., 1]
    compared = 0
    for r in range(len(prompts)):
        n = int(theirs.lengths[r])
        ties = (margin[r, :n] < TIE).nonzero()
        upto = int(ties[0]) + 1 if len(ties) else n  # the tied position may go either way
        assert ours.completion_ids[r, :upto].tolist() == theirs.completion_ids[r, :upto].tolist()
        compared += upto
    return ours.completion_ids, compared


def _engine_vs_trainer(engine, policy, tok):
    """The largest |engine - trainer| log-prob over 16 rows the engine samples at temperature 1
    (most tokens are not the argmax, and each log-prob depends on every logit of its position
    through the softmax's normaliser: the output head's whole weight)."""
    engine.reseed(0)
    roll = generate(engine, tok, _templated(tok), group_size=4, max_new_tokens=12,
                    temperature=1.0)
    logp = _scored(policy, roll, torch.arange(len(roll.texts)) // 4, 1.0, 1.0)
    own = roll.completion_mask.bool()
    return float((logp[own] - roll.logprobs[own]).abs().max())


@torch.no_grad()
def _move(policy, lora):
    """A weight change the engine must see: the tied input embedding and output head (full
    fine-tuning), or every LoRA B matrix (its merged delta, or the adapter)."""
    torch.manual_seed(0)
    for name, p in policy.named_parameters():
        if (".lora_B." in name) if lora else name.endswith("embed_tokens.weight"):
            p.add_(torch.randn_like(p) * (0.5 if lora else 0.05))


def _every_position(engine, policy, tok):
    """The largest |engine - trainer| log-prob at every position of a prompt and a fixed
    continuation (each token's log-prob after the ones before it: the prompt's KV and every
    logit of each position through the softmax's normaliser), by gpu_check's vLLM phase's own
    check (scripts/gpucheck/vllm_sync.py)."""
    from scripts.gpucheck.vllm_sync import every_position_gap

    ids = tok(_templated(tok)[0] + "The answer is 5, since 2 + 3 = 5.\n",
              add_special_tokens=False)["input_ids"]
    return every_position_gap(engine, policy, ids)


@pytest.mark.parametrize("lora", [None, "merged", "adapter"])
def test_after_an_update_the_engine_scores_as_the_trainer(vllm_engine, vllm_model, tmp_path,
                                                          lora):
    """After an optimizer step and after a change to the tied embedding and head (or the LoRA
    matrices), the engine's log-probs are the trainer's, within float rounding; before the
    change reaches the engine they are far apart, so the check cannot pass by chance."""
    vllm_engine.lora = lora or "merged"
    cfg = h.config(tmp_path, steps=1, eval=False, learning_rate=3e-2, beta=0.0, group_size=4,
                   max_new_tokens=8, lora_r=8 if lora else 0, lora_alpha=32)
    model, tok = _policy(vllm_model)
    trainer = GRPOTrainer(cfg, model=model, tokenizer=tok, env=h.ShortEnv(),
                          engine=vllm_engine)
    assert _engine_vs_trainer(vllm_engine, trainer.policy, tok) < ATOL
    assert _every_position(vllm_engine, trainer.policy, tok) < ATOL
    metrics = trainer.train_step().metrics
    assert not metrics["skipped"]
    # Whether one step changes the greedy tokens is chance; the log-probs are not.
    assert _engine_vs_trainer(vllm_engine, trainer.policy, tok) < ATOL
    assert _every_position(vllm_engine, trainer.policy, tok) < ATOL
    _, compared = _greedy_agree(trainer, vllm_engine, tok)
    assert compared >= 24  # most of the 4 x 16 tokens were compared
    if lora == "adapter":
        assert vllm_engine._lora_request is not None  # vLLM applied the adapter itself
    # The step logged the engine/trainer mismatch on its own samples: float noise here.
    assert 0 <= metrics["rollout/logprob_abs_diff_mean"] <= metrics["rollout/logprob_abs_diff_max"]
    assert metrics["rollout/logprob_abs_diff_max"] < ATOL
    assert metrics["rollout/seq_ratio_min"] <= 1 <= metrics["rollout/seq_ratio_max"] < 1 + 1e-3
    assert "time/engine_sync_s" in metrics
    _move(trainer.policy, lora)
    stale = _engine_vs_trainer(vllm_engine, trainer.policy, tok)
    assert stale > 1000 * ATOL, stale  # an engine that missed the change fails the check
    stale = _every_position(vllm_engine, trainer.policy, tok)
    assert stale > 1000 * ATOL, stale
    trainer.sync_engine()
    assert _engine_vs_trainer(vllm_engine, trainer.policy, tok) < ATOL
    assert _every_position(vllm_engine, trainer.policy, tok) < ATOL


def test_a_sync_gathered_a_bucket_at_a_time_reaches_the_engine(vllm_engine, vllm_model,
                                                               monkeypatch):
    """The ZeRO-3 path of the sync (parameters partitioned, gathered in buckets, copied out)
    into the real engine: after a change to the tied embedding and head, its log-probs are the
    changed model's, with no more than one bucket whole at once."""
    import learner.sampling.vllm_engine as module

    vllm_engine.lora = "merged"
    model, tok = _policy(vllm_model)
    vllm_engine.sync(model)
    _move(model, None)
    assert _engine_vs_trainer(vllm_engine, model, tok) > 1000 * ATOL  # stale until synced
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    monkeypatch.setattr(module, "SYNC_BUCKET_BYTES", largest)
    gather = h.Partitioned(model)
    vllm_engine.sync(model, gather=gather)
    assert gather.gathers >= 3 and gather.peak <= largest and gather.live == 0
    gather.restore(model)
    assert _engine_vs_trainer(vllm_engine, model, tok) < ATOL


def test_the_hf_loop_logs_the_same_mismatch_figures(tmp_path):
    """The baseline: the learner's own loop against its own loss passes."""
    cfg = h.config(tmp_path, steps=1, eval=False, beta=0.0)
    trainer = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())
    assert trainer.engine is None
    metrics = trainer.train_step().metrics
    assert 0 <= metrics["rollout/logprob_abs_diff_mean"] <= metrics["rollout/logprob_abs_diff_max"]
    assert metrics["rollout/logprob_abs_diff_max"] < ATOL
    assert metrics["rollout/seq_ratio_std"] < 1e-3


def test_the_mismatch_is_measured_not_assumed(tmp_path):
    """Sampling log-probs that are off by a known amount show in the metrics as that amount."""
    cfg = h.config(tmp_path, steps=1, eval=False, beta=0.0)
    trainer = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())
    samples, advantages, batch = h.step_batch(trainer)
    own = batch.loss_mask.bool()
    batch.sampling_logprobs = batch.sampling_logprobs - 0.5 * own  # the engine said 0.5 less
    stats = trainer.update(batch)
    assert stats.mismatch["rollout/logprob_abs_diff_mean"] == pytest.approx(0.5, abs=1e-3)
    tokens = own.sum(-1)[own.any(-1)].double()
    assert stats.mismatch["rollout/seq_ratio_max"] == pytest.approx(
        float((0.5 * tokens).exp().max()), rel=1e-3)


def test_is_correction_and_one_step_off_policy_with_the_engine(vllm_engine, vllm_model, tmp_path):
    """--is-correction token and --async-steps 1 with vLLM itself. The engine is synced one step
    late, so from step 2 on the samples are one optimizer step stale. At staleness 0 the
    weights pi_trainer / pi_engine are float noise away from 1 (the two agree within ATOL per
    token); once stale they carry the step's policy change (a large learning rate here), capped
    at C; every loss is finite."""
    vllm_engine.lora = "merged"
    cfg = h.config(tmp_path, steps=3, eval=False, learning_rate=3e-2, beta=0.0, group_size=4,
                   max_new_tokens=8, is_correction="token", async_steps=1)
    model, tok = _policy(vllm_model)
    trainer = GRPOTrainer(cfg, model=model, tokenizer=tok, env=h.ShortEnv(), engine=vllm_engine)
    try:
        rows = [trainer.train_step().metrics for _ in range(3)]
    finally:
        trainer.close()  # its draw-ahead thread; the shared engine is not the trainer's
    # ... nor is vLLM's process group: the engine still needs it (to shut down, among others).
    assert torch.distributed.is_initialized()
    assert [r["rollout/staleness"] for r in rows] == [0, 1, 1]
    trained = [r for r in rows if not r["skipped"]]
    assert rows[0] in trained and len(trained) >= 2
    assert abs(rows[0]["rollout/is_weight_mean"] - 1) < 1e-3
    assert rows[0]["rollout/is_clipped_frac"] == 0
    for r in trained:
        assert 0 < r["rollout/is_weight_mean"] <= cfg.is_cap
        assert torch.isfinite(torch.tensor(r["loss"]))
    stale = [r for r in trained if r["rollout/staleness"] == 1]
    assert any(abs(r["rollout/is_weight_mean"] - 1) > 1e-3 for r in stale)


class FakeLLM:
    """Stands in for ``vllm.LLM`` (no engine starts): records what the learner's engine asks of
    it, in order, and answers generate with one EOS-ended row per request."""

    calls: list = []
    kwargs: dict = {}

    def __init__(self, **kwargs):
        from types import SimpleNamespace

        FakeLLM.kwargs, FakeLLM.calls = kwargs, []
        config = SimpleNamespace(dtype=torch.float32, max_model_len=kwargs["max_model_len"] or 64,
                                 hf_text_config=SimpleNamespace(tie_word_embeddings=False))
        self.llm_engine = SimpleNamespace(model_config=config)

    def generate(self, prompts, params, **kwargs):
        from types import SimpleNamespace

        self.calls.append(("generate", [p.seed for p in params]))
        step = {7: SimpleNamespace(logprob=-0.5)}
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7], finish_reason="stop",
                                                         logprobs=[step])] * p.n)
                for p in params]

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))
        return True

    def collective_rpc(self, method, kwargs):
        self.calls.append((method, len(list(kwargs["weights_iterator"]))))

    def apply_model(self, func):
        return [False]

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache", None))
        return True


def _fake_engine(monkeypatch, tmp_path, *, sleep, supported=True, **kwargs):
    import vllm

    import learner.sampling.vllm_engine as module

    monkeypatch.setattr(vllm, "LLM", FakeLLM)
    monkeypatch.setattr(module, "sleep_supported", lambda device: supported)
    return module.VLLMEngine(str(tmp_path), sleep=sleep, max_model_len=64, **kwargs)


def _fake_decode(engine, repeat=2, **kwargs):
    ids, mask = torch.tensor([[1, 2, 3], [0, 4, 5]]), torch.tensor([[1, 1, 1], [0, 1, 1]])
    return engine.decode(ids, mask, budgets=torch.tensor([4] * 2 * repeat),
                         eos=torch.tensor([7]), pad_id=0, repeat=repeat, **kwargs)


def test_a_colocated_engine_sleeps_for_the_update_and_wakes_weights_first(monkeypatch, tmp_path):
    engine = _fake_engine(monkeypatch, tmp_path, sleep=True)
    assert engine.sleeps and FakeLLM.kwargs["enable_sleep_mode"] is True
    model = h.model()
    _fake_decode(engine)
    engine.sleep()
    engine.sleep()  # asleep already: nothing more
    engine.sync(model)
    _fake_decode(engine)
    engine.sleep()
    _fake_decode(engine)  # the update was skipped: no sync, the draw wakes it whole
    names = len(list(model.named_parameters(remove_duplicate=False)))
    assert FakeLLM.calls == [
        ("generate", [None, None]),
        ("sleep", 1),
        ("wake_up", ["weights"]),  # the new weights go in before the KV cache comes back
        ("reload_weights", names),
        ("wake_up", ["kv_cache"]),
        ("reset_prefix_cache", None),
        ("generate", [None, None]),
        ("sleep", 1),
        ("wake_up", None),
        ("generate", [None, None]),
    ]


def test_no_sleep_without_the_flag_or_the_capability(monkeypatch, tmp_path):
    for sleep, supported in ((False, True), (True, False)):
        engine = _fake_engine(monkeypatch, tmp_path, sleep=sleep, supported=supported)
        assert not engine.sleeps and "enable_sleep_mode" not in FakeLLM.kwargs
        _fake_decode(engine)
        engine.sleep()
        engine.sync(h.model())
        assert [c[0] for c in FakeLLM.calls] == ["generate", "reload_weights",
                                                  "reset_prefix_cache"]
    from learner.sampling.vllm_engine import sleep_supported

    assert not sleep_supported(torch.device("cpu"))  # vLLM sleeps on CUDA only


def test_the_engine_is_seeded_once_unless_requests_need_their_own(monkeypatch, tmp_path):
    engine = _fake_engine(monkeypatch, tmp_path, sleep=False, seed=3, max_num_seqs=16)
    assert FakeLLM.kwargs["seed"] == 3 and FakeLLM.kwargs["max_num_seqs"] == 16
    _fake_decode(engine)
    assert FakeLLM.calls[-1] == ("generate", [None, None])  # one batched draw, no per-row RNG
    engine.seed_requests = True  # --async-steps 1: a draw beside the update's
    _fake_decode(engine)
    first = FakeLLM.calls[-1][1]
    assert None not in first and first[1] == first[0] + 2  # a seed per context, G apart
    engine.reseed(3)
    _fake_decode(engine)
    assert FakeLLM.calls[-1][1] == first  # restarted as a fresh engine's
    _fake_decode(engine, repeat=1, greedy=True)
    assert FakeLLM.calls[-1] == ("generate", [None, None])
    with pytest.raises(ValueError, match="--vllm-max-model-len 65 or more"):
        engine.decode(torch.ones(1, 61, dtype=torch.long), torch.ones(1, 61),
                      budgets=torch.tensor([4]), eos=torch.tensor([7]), pad_id=0)


class RecordingEngine(HFEngine):
    """A synced engine over the learner's own loop that records the trainer's calls."""

    name = "recording"

    def __init__(self, model):
        super().__init__(model)
        self.events, self.seed_requests = [], None

    def decode(self, ids, mask, **kwargs):
        self.events.append("decode")
        return super().decode(ids, mask, **kwargs)

    def sync(self, policy, gather=None):
        self.events.append("sync")
        self.model.load_state_dict(policy.state_dict())

    def sleep(self):
        self.events.append("sleep")

    def close(self):
        pass


def test_the_trainer_puts_the_engine_to_sleep_between_sampling_and_the_update(tmp_path):
    cfg = h.config(tmp_path, steps=1, eval=False, beta=0.0)
    engine = RecordingEngine(h.model())
    trainer = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv(),
                          engine=engine)
    assert engine.seed_requests is False  # in order: the engine's one generator
    assert engine.events == ["sync"]
    metrics = trainer.train_step().metrics
    assert not metrics["skipped"]
    decodes = engine.events.count("decode")
    assert decodes >= 1
    assert engine.events == ["sync"] + ["decode"] * decodes + ["sleep", "sync"]
