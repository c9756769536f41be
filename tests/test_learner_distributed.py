"""Two CPU processes (gloo) under ``accelerate launch``: replicas stay identical, and the
gradient they average is the gradient of the whole batch."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from learner.evaluation.run_dir import load_run_policy
from learner.training.run_log import read_metrics
from tests import learner_helpers as h
from tests.polling import free_port

ZERO3 = ("--use_deepspeed", "--zero_stage", "3")


def launch(args: list, *flags: str) -> None:
    """``accelerate launch`` two CPU processes of ``python -m tests.learner_helpers ARGS``."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *(flags or ("--multi_gpu",)),
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--main_process_port", str(free_port()),
           "--dynamo_backend", "no", "-m", "tests.learner_helpers", *map(str, args)]
    # As `accelerate launch --gradient_accumulation_steps 3` would set it: the trainer must not
    # let accelerate (or DeepSpeed) divide the loss by it on top of its own normalisers.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "3"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    # The launcher's own summary ends stderr; the ranks' errors come before it.
    errors = [line for line in proc.stderr.splitlines()
              if any(w in line for w in ("Error", "error:", "terminate", "what()", "Abort"))]
    assert proc.returncode == 0, "\n".join(errors[-40:]) + "\n" + proc.stderr[-2000:]


def check_replicas(out) -> None:
    lines = [(out / f"replica-{r}.txt").read_text().split() for r in (0, 1)]
    (init0, final0, world0, pos0, lr0, n0), (init1, final1, world1, pos1, lr1, n1) = lines
    assert world0 == world1 == "2"
    assert init0 == init1 and final0 == final1  # identical replicas after the updates
    assert final0 != init0  # ... and the updates did change them
    assert pos0 == pos1 == "8"  # both walked the same prompt stream, 4 prompts a step
    assert float(lr0) == float(lr1) == 1e-3 * 2 / 4  # warmup counts steps, not processes
    assert n0 == n1 == "3"  # held-out results gathered from both processes
    assert (out / "run/checkpoints/step-0000002").is_dir()
    saved = AutoModelForCausalLM.from_pretrained(out / "final")
    assert saved.model.embed_tokens.weight.abs().sum() > 0  # full weights, not empty shards
    for r in (0, 1):
        sync = json.loads((out / f"sync-{r}.json").read_text())
        assert sync["timeout_s"] == 321  # --dist-timeout reached the process group
        assert sync["equal"]  # a vLLM sync streams every weight, whole, under each name
        if sync["zero3"]:  # ZeRO-3 gathered a bucket at a time, never the whole model
            assert 0 < sync["peak"] <= max(sync["bucket"], 49152 * 64 * 4), sync
            assert sync["gathers"] >= 3 and sync["live"] == 0, sync


def test_ddp_and_deepspeed_zero2_zero3_train_alike(tmp_path):
    # The same script, no code change: DDP, then accelerate's DeepSpeed launcher with ZeRO
    # stage 2 (gradients and optimizer state sharded) and stage 3 (weights and the reference
    # model too) over two CPU processes. All must keep their replicas in step and log one run.
    launch(["replicas", tmp_path / "ddp"])
    check_replicas(tmp_path / "ddp")
    ddp = read_metrics(tmp_path / "ddp/run")
    assert [r["step"] for r in ddp] == [0, 1, 2]
    ddp_weights = AutoModelForCausalLM.from_pretrained(tmp_path / "ddp/final").state_dict()
    for stage in ("2", "3"):
        out = tmp_path / f"zero{stage}"
        launch(["replicas", out], "--use_deepspeed", "--zero_stage", stage)
        check_replicas(out)
        assert (out / "run/checkpoints/step-0000002/zero_to_fp32.py").is_file()  # DeepSpeed ran
        rows = read_metrics(out / "run")
        assert [r["step"] for r in rows] == [0, 1, 2]
        for a, b in zip(ddp[1:], rows[1:], strict=True):
            for key in ("reward/mean", "loss", "kl", "grad_norm", "entropy", "lr"):
                assert math.isclose(a[key], b[key], rel_tol=1e-4, abs_tol=1e-7), (stage, key)
        weights = AutoModelForCausalLM.from_pretrained(out / "final").state_dict()
        for key, value in ddp_weights.items():
            assert torch.allclose(value, weights[key], atol=1e-6), (stage, key)


def test_averaged_gradient_equals_the_whole_batch_gradient(tmp_path):
    # Processes hold different numbers of tokens; every loss type must still normalise globally,
    # as its paper defines the loss over the whole step (computed by the helper from that
    # definition, with a policy moved off the reference so that the KL term has a gradient).
    launch(["grads", tmp_path])
    report = json.loads((tmp_path / "gradients.json").read_text())
    std = report.pop("batch_std")
    assert std["got"] == pytest.approx(std["want"], rel=1e-9) and std["local"] != std["want"]
    assert set(report) == {"grpo", "dr_grpo", "dapo", "dapo/one_process_flat", "grpo/is_token"}
    flat = report["dapo/one_process_flat"]
    assert flat["tokens"][1] == 0 and flat["rows"][1] >= 1  # process 1 only kept collectives
    assert flat["counted_tokens"][1] > 0  # ... but its tokens count in DAPO's normaliser
    for loss_type, r in report.items():
        assert r["scale"] > 0, loss_type
        # fp32 with cancelling advantages: a few 1e-6 of the largest gradient. A wrong
        # normaliser is off by a factor, and the KL term alone is 1e-3 of it or more.
        assert r["max_diff"] <= 5e-5 * r["scale"] + 1e-8, (loss_type, r)
        if not loss_type.endswith("flat"):  # beta > 0: the KL's own gradient is checked too
            assert r["kl_scale"] > 1e-3 * r["scale"], (loss_type, r)
    assert any(len(set(r["tokens"])) > 1 for r in report.values())  # the case that matters
    # --is-correction's weights and the engine mismatch are logged over both processes'
    # tokens, alike on both: a per-process figure averaged would weigh them 1:1.
    corrected = report["grpo/is_token"]
    n0, n1 = corrected["tokens"]
    assert n0 != n1
    logged = corrected["logged"][0]
    assert corrected["logged"][1] == pytest.approx(logged, rel=1e-12)
    weight = [min(math.exp(o), h.IS_CAP) for o in h.IS_OFFSETS]
    assert logged["rollout/is_weight_mean"] == pytest.approx(
        (n0 * weight[0] + n1 * weight[1]) / (n0 + n1), rel=1e-4)
    assert logged["rollout/is_clipped_frac"] == pytest.approx(n1 / (n0 + n1))
    assert logged["rollout/logprob_abs_diff_mean"] == pytest.approx(
        (n0 * h.IS_OFFSETS[0] + n1 * h.IS_OFFSETS[1]) / (n0 + n1), rel=1e-3)
    assert logged["rollout/logprob_abs_diff_max"] == pytest.approx(h.IS_OFFSETS[1], rel=1e-3)
    # The sequence ratio e^(offset x length) ranges over both processes' rows.
    ratios = [math.exp(o * n) for o, rows in zip(h.IS_OFFSETS, corrected["row_tokens"],
                                                 strict=True) for n in rows if n]
    assert logged["rollout/seq_ratio_min"] == pytest.approx(min(ratios), rel=1e-3)
    assert logged["rollout/seq_ratio_max"] == pytest.approx(max(ratios), rel=1e-3)


def test_deepspeed_zero3_cli_run_resumes_identically(tmp_path):
    # Through python -m learner.run: the model is loaded from a path (transformers partitions it
    # while loading under ZeRO-3), the reference is loaded again, checkpoints are DeepSpeed's.
    tiny = h.save_tiny(tmp_path / "tiny")
    common = ["cli", "--env", h.SHORT_ENV_ID, "--model", tiny, "--prompts-per-step", "4",
              "--group-size", "4", "--max-new-tokens", "8", "--learning-rate", "1e-3",
              "--save-every", "2", "--samples-every", "0", "--no-eval", "--no-progress"]
    # The last checkpoint kept: learner.eval --run reads its shards below.
    # A finished run keeps only final/ unless asked: the full run keeps its checkpoint for
    # learner.eval's shards below, and the part to resume keeps its own.
    launch([*common, "--steps", "4", "--output-dir", tmp_path / "full",
            "--keep-final-checkpoint"], *ZERO3)
    launch([*common, "--steps", "2", "--output-dir", tmp_path / "part",
            "--keep-final-checkpoint"], *ZERO3)
    launch([*common, "--steps", "4", "--output-dir", tmp_path / "part", "--resume"], *ZERO3)
    want, got = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")
    assert [r["step"] for r in want] == [r["step"] for r in got] == [1, 2, 3, 4]
    for a, b in zip(want, got, strict=True):
        for key in ("reward/mean", "loss", "kl", "grad_norm", "entropy"):
            assert math.isclose(a[key], b[key], rel_tol=1e-5, abs_tol=1e-7), (a["step"], key)
    assert want[-1]["kl"] > 0
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "full/final").state_dict()
    start = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    assert any(not torch.equal(v, start[k]) for k, v in final.items())  # trained, full weights
    # learner.eval --run reads the latest (step 4) checkpoint's ZeRO shards: the final weights.
    policy, source = load_run_policy(tmp_path / "full")
    assert source.endswith("step-0000004")
    for key, value in policy.state_dict().items():
        assert torch.allclose(value, final[key], atol=1e-6), key


def test_infrastructure_failures_are_counted_over_processes_and_stop_them_together(tmp_path):
    # Only process 1 lost containers (4 of its 8 samples): the count and the stop are global.
    launch(["infra", tmp_path])
    said = {(tmp_path / f"stop-{r}.txt").read_text() for r in (0, 1)}
    assert said == {"grading failed for infrastructure on 4 of 16 samples in step 1 (25.0%, more "
                    "than --max-infra-error-rate 0.05; first: container lost): stopped after "
                    "step 1 of 3 rather than train on the rest; checkpoint saved"}
    rows = read_metrics(tmp_path / "run")
    assert [(r["step"], r["samples/infra_errors"]) for r in rows] == [(1, 4)]
    assert (tmp_path / "run/checkpoints/step-0000001").is_dir()


def test_out_of_memory_on_one_process_ends_the_launch_in_one_line(tmp_path):
    """Process 1 runs out of memory in step 2's update while process 0 goes on into the
    step's collectives: process 1 says so in one line and ends at once (a checkpoint would
    need process 0), process 0's collective fails on the closed connection and says that in
    one line, and the launcher stops: no wait for a timeout, no traceback from a process."""
    tiny = h.save_tiny(tmp_path / "tiny")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--main_process_port", str(free_port()), "--dynamo_backend", "no",
           "-m", "tests.learner_helpers", "cli-oom", "--env", h.SHORT_ENV_ID,
           "--model", str(tiny), "--output-dir", str(tmp_path / "run"), "--steps", "3",
           "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "4",
           "--no-eval", "--no-progress", "--samples-every", "0", "--save-every", "1",
           "--micro-batch-tokens", "256"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    # 10 s on a quiet machine; before, process 1 waited in the checkpoint's collectives and
    # process 0 in the step's, until the process group's timeout (30 minutes).
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode != 0
    ours = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    oom = [line for line in ours if "out of memory" in line]
    assert len(oom) == 1 and "[process 1 of 2]" in oom[0], proc.stderr[-3000:]
    assert "--micro-batch-tokens 128" in oom[0] and "resume from the last checkpoint" in oom[0]
    # Process 0 either said its peer ended, or the launcher stopped it first.
    assert all("another process of the launch ended" in line for line in ours if line not in oom)
    assert "[rank0]: Traceback" not in proc.stderr and "[rank1]: Traceback" not in proc.stderr
    assert (tmp_path / "run/checkpoints/step-0000001").is_dir()  # step 1's checkpoint stays
