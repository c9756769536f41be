"""Device placement by construction (``--device``), proven without a GPU: torch's lazy backend
(device ``lazy``) refuses to mix its tensors with CPU tensors, as CUDA does, so a whole run on it
shows that no step, evaluation, checkpoint or resume mixes devices. Also: a CUDA out-of-memory
error mid-run is one line and a checkpoint, and a memory plan over a GPU's free memory says so
before step 1 with the flag value that fits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from learner.model import load_model
from learner.training import memory_plan
from learner.training.run_log import read_metrics
from tests import learner_helpers as h


def cli(capsys, tiny: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``python -m learner.run`` (with ShortEnv registered: a reward a random model moves, so
    every step has rows to train on) on the lazy device, at tiny sizes: its ``main`` in this
    process (the module's other lazy tests run here too), saving a Python start with torch and
    transformers to import per run; the thread count the run sets is put back."""
    import gymnasium as gym

    from learner import run

    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    argv = ["--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
            "--device", "lazy", "--prompts-per-step", "2", "--group-size", "3",
            "--max-new-tokens", "6", "--learning-rate", "1e-3", "--eval-size", "2",
            "--eval-batch-size", "2", "--no-eval-perturbations", "--samples-every", "1",
            "--no-progress", "--num-threads", "1", *extra]
    return _in_process(capsys, run.main, argv)


def _in_process(capsys, main, argv: list[str]) -> subprocess.CompletedProcess:
    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        code = main(argv)
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, captured.out, captured.err)


def _trained(rows: list[dict]) -> None:
    for r in rows:  # the update ran: rows were selected, scored and stepped on
        assert r["skipped"] is False and r["loss"] is not None and r["grad_norm"] > 0, r


def test_the_cli_trains_evaluates_checkpoints_and_resumes_on_the_lazy_device(tmp_path, capsys):
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    first = cli(capsys, tiny, out, "--steps", "2", "--save-every", "1", "--keep-final-checkpoint",
                "--vllm-max-num-seqs", "3")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "held-out before:" in first.stdout and "held-out after:" in first.stdout
    # A vLLM flag in a run the learner's own loop samples: said, not silently dropped.
    assert "note: --vllm-max-num-seqs shape the vLLM engine, and this run samples with the " \
        "learner's own loop (--rollout-engine auto on lazy): ignored" in first.stdout
    record = json.loads((out / "config.json").read_text())
    assert record["device"] == "lazy" and record["provenance"]["device"] == "lazy"
    assert record["provenance"]["rollout_engine"] == "hf"
    rows = read_metrics(out)
    assert [r["step"] for r in rows if "reward/mean" in r] == [1, 2]
    _trained([r for r in rows if "reward/mean" in r])
    assert (out / "checkpoints" / "step-0000002").is_dir()
    # final/ was written from the lazy model and loads the way users load a model.
    final, start = load_model(str(out / "final")), load_model(str(tiny))
    moved = max(float((a - b).detach().abs().max()) for a, b in zip(
        final.parameters(), start.parameters(), strict=True))
    assert moved > 0

    resumed = cli(capsys, tiny, out, "--steps", "3", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step 2 of 3" in resumed.stdout
    assert "note: --resume changes vllm_max_num_seqs 3 -> 0" in resumed.stdout
    assert json.loads((out / "config.json").read_text())["resumed_changes"] == [
        {"checkpoint": "step-0000002", "changed": {"vllm_max_num_seqs": [3, 0]}}]
    assert "held-out after:" in resumed.stdout
    rows = [r for r in read_metrics(out) if "reward/mean" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    _trained(rows[-1:])
    assert rows[-1]["kl"] > 0  # the resumed policy is the trained one, not the reference


def test_dynamic_sampling_and_dapo_shaping_on_the_lazy_device(tmp_path, capsys):
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    done = cli(capsys, tiny, out, "--steps", "1", "--no-eval", "--dynamic-sampling",
               "--dynamic-sampling-metric", "reward", "--max-sampling-tries", "2",
               "--overlong-cache", "3", "--loss-type", "dapo", "--beta", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = read_metrics(out)
    _trained([row])
    assert row["group/sampling_tries"] >= 1 and row["group/informative"] >= 1
    # Completions of the 6-token budget sit in the last 3 tokens: the shaping punishes them.
    assert row["completion/len_mean"] > 3 and row["reward/overlong"] < 0


@pytest.mark.docker
def test_a_multi_turn_tool_episode_trains_on_the_lazy_device(tmp_path, sandbox):
    """grpo/MathPython-v0 with the real sandbox: a tiny model taught one tool call (on the
    CPU) runs its episodes on the lazy device, the tool's output comes back between its
    turns, and a step trains on the policy's own tokens there."""
    import gymnasium as gym

    import envs  # noqa: F401
    from learner.model import chat_prompt
    from learner.training.trainer import GRPOTrainer

    env = gym.make("grpo/MathPython-v0", pack="arith", level=2, max_turns=2,
                   sandbox=sandbox).unwrapped
    task = env.pack.task_at("train", 0)
    call = f"```python\nprint({task['expression']})\n```"
    tok = h.tokenizer()
    model = h.model()
    prompt = tok(chat_prompt(tok, env.prompt(task)), add_special_tokens=False)["input_ids"]
    turn = tok(call, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + turn])
    labels = torch.tensor([[-100] * len(prompt) + turn])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(300):  # memorise the tool call (the tiny model starts random)
        out = model(input_ids=ids, labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        if float(out.loss.detach()) < 0.05:
            break
    model.eval()
    env.pack.task_at = lambda split, i, _at=env.pack.task_at: _at(split, 0)
    cfg = h.config(tmp_path, steps=1, prompts_per_step=1, group_size=2,
                   max_new_tokens=len(turn) + 4, max_episode_tokens=120, eval=False,
                   temperature=0.3, device="lazy", beta=0.04)
    t = GRPOTrainer(cfg, model=model, tokenizer=tok, env=env)
    # As after an update: the KL term counts, so every row with a policy token is trained on
    # (the taught model's group may well have one reward: no advantage to learn from).
    t.update.policy_is_reference = False
    try:
        assert next(t.policy.parameters()).device.type == "lazy"
        step = t.train_step()
    finally:
        t.close()
    roll = step.samples.rollout
    assert roll.completion_ids.device.type == "lazy"
    assert any(r["role"] == "tool" for r in roll.transcripts[0])
    assert step.metrics["tool/calls_mean"] > 0
    # The observation's tokens are in the completion but not the policy's.
    assert int(roll.action_mask.sum()) < int(roll.completion_mask.sum())
    # The reference pass, the loss pass and the optimizer step ran there, on the policy's tokens.
    assert not step.update.skipped and step.update.loss is not None
    assert step.batch is not None and step.batch.loss_mask.device.type == "lazy"
    assert int(step.batch.loss_mask.sum()) == int(roll.action_mask.sum())


def test_the_steps_tensors_are_made_on_the_rollouts_device(monkeypatch):
    """On the meta device (shapes and placement, no arithmetic): a step's masks, groups,
    rewards, advantages and batch rows all land where the rollout is."""
    from torch.fx.experimental import _config

    # Boolean indexing needs nonzero's count: here every sample is graded, so "all" is right.
    monkeypatch.setattr(_config, "meta_nonzero_assume_all_nonzero", True)
    from learner.sampling.rollout import Rollout
    from learner.sampling.scoring import Scores
    from learner.training import grpo
    from learner.training.batching import Batch
    from learner.training.samples import StepSamples

    meta = torch.device("meta")
    b, t = 4, 5
    roll = Rollout(prompt_ids=torch.zeros(b, 3, dtype=torch.long, device=meta),
                   prompt_mask=torch.ones(b, 3, dtype=torch.long, device=meta),
                   completion_ids=torch.zeros(b, t, dtype=torch.long, device=meta),
                   completion_mask=torch.ones(b, t, dtype=torch.long, device=meta),
                   truncated=torch.zeros(b, dtype=torch.bool, device=meta), texts=["x"] * b,
                   generated_tokens=b * t, logprobs=torch.zeros(b, t, device=meta))
    scores = Scores.from_results([1.0, 0.0, 1.0, 0.0], [{}] * b)
    samples = StepSamples([{"id": i} for i in range(2)], ["p", "q"], roll, scores, 2)
    for tensor in (samples.groups, samples.graded, samples.rewards, samples.moments.std):
        assert tensor.device == meta
    advantages = grpo.group_advantages(samples.rewards, samples.groups, samples.moments)
    assert advantages.device == meta
    assert grpo.overlong_penalty(roll.policy_lengths, 5, 2).device == meta  # DAPO's shaping
    # (select_rows counts rows with .item(), which meta cannot: the lazy tests run it.)
    batch = Batch(roll.prompt_ids, roll.prompt_mask, roll.completion_ids, roll.completion_mask,
                  roll.completion_mask, advantages, samples.groups)
    assert batch.positions().device == meta  # the micro-batch packing's costs


def test_device_flag_errors_are_one_line(tmp_path, capsys):
    from learner import run
    from learner.training import placement

    with pytest.raises(SystemExit):
        run.main(["--device", "cuda 0"])
    assert "--device must be auto, cpu, cuda, cuda:N" in capsys.readouterr().err
    with pytest.raises(placement.DeviceError, match="not a torch device"):
        placement.resolve("nosuchdevice")
    if not torch.cuda.is_available():
        with pytest.raises(placement.DeviceError, match="no CUDA GPU is visible"):
            placement.resolve("cuda:1")
    # Devices torch names but cannot use here: one line each, not a traceback from the move.
    with pytest.raises(placement.DeviceError, match="holds shapes and no data"):
        placement.resolve("meta")
    with pytest.raises(placement.DeviceError, match="the CPU has no device index"):
        placement.resolve("cpu:1")
    assert placement.resolve("cpu:0") == torch.device("cpu:0")
    for name in ("mps", "xpu", "hpu", "privateuseone"):
        if name == "mps" and torch.backends.mps.is_available():
            continue
        if name == "xpu" and torch.xpu.is_available():
            continue
        with pytest.raises(placement.DeviceError, match=f"--device {name}: this torch cannot "
                           "use it") as caught:
            placement.resolve(name)
        assert "\n" not in str(caught.value)


def test_the_lazy_device_refuses_a_model_it_cannot_hold_in_one_line(tmp_path, capsys):
    # SmolLM2-135M on the lazy backend filled 24 GB in one 16-token step and was killed.
    from learner import run
    from learner.training import placement

    lazy = placement.resolve("lazy")
    small = h.model()  # the tests' tiny model, 3.2M parameters: the lazy device takes it
    assert placement.moved(small, lazy).lm_head.weight.device.type == "lazy"
    wide = h.model()
    wide.resize_token_embeddings(placement.LAZY_MAX_PARAMETERS // 64 + 1)
    wide.save_pretrained(tmp_path / "wide")
    h.tokenizer().save_pretrained(tmp_path / "wide")
    code = run.main(["--env", "grpo/MathExact-v0", "--model", str(tmp_path / "wide"),
                     "--device", "lazy", "--steps", "1", "--no-eval", "--no-progress",
                     "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("error: --device lazy: a model of 2") and \
        "parameters is over the lazy backend's 20M" in err[-1], err[-3:]
    assert not any("Traceback" in line for line in err)


def test_learner_eval_evaluates_on_the_lazy_device_and_records_it(tmp_path, capsys):
    """``python -m learner.eval --device`` (its ``main``, in this process as ``cli``): the same
    placement as learner.run (the model moved there, greedy, sampled and perturbed passes on
    it), recorded in the report."""
    from learner import eval as eval_cli

    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "eval"
    argv = ["--env", "grpo/MathExact-v0",
            "--env-kwargs", '{"pack": "arith", "level": 1}', "--model", str(tiny),
            "--device", "lazy", "--limit", "2", "--group-size", "2", "--max-new-tokens", "4",
            "--batch-size", "2", "--general-limit", "0", "--num-threads", "1",
            "--output-dir", str(out)]
    done = _in_process(capsys, eval_cli.main, argv)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    meta = report["metadata"]
    assert meta["device"] == "lazy" and meta["provenance"]["device"] == "lazy"
    assert report["accuracy"]["n"] == 2 and report["pass_at_k"]["n"] == 2
    assert report["perturbations"]["results"]["original"]["n"] == 2


def test_learner_eval_device_errors_are_one_line(tmp_path, capsys):
    from learner import eval as eval_cli

    with pytest.raises(SystemExit):
        eval_cli.main(["--env", "grpo/MathExact-v0", "--device", "cuda 0"])
    assert "--device must be auto, cpu, cuda, cuda:N" in capsys.readouterr().err
    if not torch.cuda.is_available():
        code = eval_cli.main(["--env", "grpo/MathExact-v0", "--device", "cuda",
                              "--output-dir", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and "no CUDA GPU is visible" in err[0], err


def test_the_resume_command_repeats_the_device(tmp_path):
    from learner.config import parse_config
    from learner.resume_command import resume_command

    cfg = parse_config(["--device", "lazy", "--output-dir", str(tmp_path / "r")])
    assert "--device lazy" in resume_command(cfg)
    assert "--device" not in resume_command(parse_config(["--output-dir", str(tmp_path)]))


def test_out_of_memory_mid_run_saves_a_checkpoint_and_prints_one_line(tmp_path, capsys,
                                                                      monkeypatch):
    """torch.OutOfMemoryError (CUDA's) raised from step 2's update on CPU: the step 1
    checkpoint stays, one line names the flag that lowers memory, no traceback, exit 1."""
    from learner import run
    from learner.training.update import PolicyUpdate

    real = PolicyUpdate.__call__
    calls = []

    def update(self, batch, staleness=0):
        calls.append(1)
        if len(calls) == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, batch, staleness)

    monkeypatch.setattr(PolicyUpdate, "__call__", update)
    import gymnasium as gym

    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)
    out = tmp_path / "run"
    code = run.main(["--env", h.SHORT_ENV_ID, "--model", str(h.save_tiny(tmp_path / "tiny")),
                     "--output-dir", str(out), "--steps", "3", "--prompts-per-step", "2",
                     "--group-size", "3", "--max-new-tokens", "6", "--no-eval",
                     "--no-progress", "--num-threads", "1", "--learning-rate", "1e-3",
                     "--micro-batch-tokens", "256"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "out of memory" in line]
    assert len(lines) == 1, err
    assert "while training after step 1 of 3" in lines[0]
    assert "--micro-batch-tokens 128" in lines[0] and "resume with:" in lines[0]
    assert (out / "checkpoints" / "step-0000001").is_dir()


def test_a_plan_over_the_gpus_free_memory_says_so_with_the_value_that_fits(monkeypatch,
                                                                          capsys):
    """memory_plan.check on a CUDA device reads the GPU's free memory (monkeypatched here: no
    GPU in CI): over it, one line with a --micro-batch-tokens under which the plan fits."""
    model = h.model()
    env = h.ShortEnv()
    cfg = h.config(Path("/nonexistent"), prompts_per_step=2, group_size=2,
                   micro_batch_tokens=4096)
    kwargs = dict(reference=True, world=1, max_tokens=cfg.max_new_tokens, main=True)
    plan = memory_plan.check(cfg, env, h.tokenizer(), model, device=torch.device("cpu"),
                             **kwargs)
    capsys.readouterr()
    # Free memory that holds everything but half of the loss pass.
    free = memory_plan.BASE_BYTES + plan.resident + plan.sampling + plan.loss_pass / 2
    free -= memory_plan.BASE_BYTES  # check adds the host's share back
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(free), int(8e10)))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    memory_plan.check(cfg, env, h.tokenizer(), model, device=torch.device("cuda", 0), **kwargs)
    line = capsys.readouterr().out.strip()
    assert line.startswith("warning: ") and "\n" not in line and "free on cuda:0" in line
    tokens = int(line.split("--micro-batch-tokens ")[1].split()[0])
    assert 64 <= tokens < 4096 and tokens % 64 == 0
    fitted = memory_plan.MemoryPlan(plan.resident, plan.sampling,
                                    plan.per_position * tokens)
    assert fitted.peak <= free + memory_plan.BASE_BYTES
    # With enough free memory nothing is said.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(8e10), int(8e10)))
    memory_plan.check(cfg, env, h.tokenizer(), model, device=torch.device("cuda", 0), **kwargs)
    assert capsys.readouterr().out == ""


def test_a_checkpoint_keeps_tied_weights_tied_in_its_cpu_copy():
    from learner.training.checkpoint import cpu_state_dict

    model = h.model()
    state = cpu_state_dict(model)
    assert model.config.tie_word_embeddings
    assert state["lm_head.weight"] is state["model.embed_tokens.weight"]
