"""A run's life as a user meets it: it stops in one line when grading's engine or cluster goes
away (with a checkpoint to resume from), on SIGINT/SIGTERM, and on ``--resume`` without a
checkpoint; it leaves only what a user needs on disk, answers typos before torch loads, and
says its plan, its pace and when it gets no learning signal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

from envs.verify.verdict import Verdict
from learner import run_layout
from learner.training.run_log import read_metrics
from learner.training.stops import GradingOutage, StopSignals
from tests import learner_helpers as h

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = ["--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "4",
            "--no-eval", "--no-progress", "--num-threads", "1", "--samples-every", "1"]


def register_short() -> None:
    if h.SHORT_ENV_ID not in gym.registry:
        gym.register(h.SHORT_ENV_ID, entry_point=h.ShortEnv)


def cli(*args: str) -> list[str]:
    """``python -m learner.run ARGS`` with test/Short-v0 registered."""
    return [sys.executable, "-m", "tests.learner_helpers", "cli", *args]


def run_in_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, bool, str]:
    """``learner.run.main(argv)`` in a fresh interpreter: its exit status, whether torch was
    imported by then, and its stderr."""
    code = ("import sys; from learner import run\n"
            f"rc = run.main({argv!r})\n"
            "print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, **(env or {})})
    rc, torch_loaded = done.stdout.split()[-2:]
    return int(rc), torch_loaded == "True", done.stderr


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- 1. the grading engine or cluster goes away ------------------------------------------------
def test_a_docker_engine_down_at_start_stops_in_one_line_before_torch_loads(tmp_path):
    out = tmp_path / "run"
    rc, torch_loaded, err = run_in_child(
        ["--env", "grpo/CodeTests-v0", "--output-dir", str(out), "--steps", "2"],
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert rc == 1 and not torch_loaded, err
    lines = error_lines(err)
    assert len(lines) == 1, err
    assert f"cannot reach the Docker engine at unix://{tmp_path}/no-engine.sock" in lines[0]
    assert "scripts/ensure-docker.sh" in lines[0]
    assert not out.exists()  # nothing written: the same command works once the engine is up


class EngineProxy:
    """A unix socket that forwards to the real Docker engine: the run's engine, as far as the
    run can tell. ``stop`` makes it unreachable (connections cut, nothing listening) without
    touching the real dockerd, which others use."""

    def __init__(self, path: str, target: str = "/var/run/docker.sock"):
        self.path, self.target = path, target
        self._conns: list[socket.socket] = []
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(path)
        self._server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # stopped
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self._server.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


@pytest.mark.docker
def test_an_engine_lost_mid_run_stops_it_within_a_step_with_a_checkpoint(tmp_path, monkeypatch):
    import docker

    from envs.domains.code_tests import CodeTestsEnv
    from learner.training.trainer import GRPOTrainer
    from sandbox import Sandbox
    from sandbox.worker import INSTANCE_LABEL, remove_container

    sock_dir = tempfile.mkdtemp(prefix="grpo-px-", dir="/tmp")  # a unix path fits 108 bytes
    proxy = EngineProxy(f"{sock_dir}/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.path}")
    sandbox = Sandbox(pool_size=1)
    try:
        env = CodeTestsEnv(sandbox=sandbox, per_test_s=1.0)
        cfg = h.config(tmp_path, steps=4, eval=False, group_size=2, max_new_tokens=4,
                       score_workers=2)
        t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=env)
        real_step = t.train_step

        def step_then_lose_the_engine():
            step = real_step()
            if step.number == 1:  # graded fine; the engine goes away before step 2
                assert step.metrics["samples/infra_errors"] == 0
                proxy.stop()
            return step

        t.train_step = step_then_lose_the_engine
        with pytest.raises(GradingOutage) as stopped:
            t.train()
        message = str(stopped.value)
        assert message.startswith("grading stopped at step 2 of 4: cannot reach the Docker "
                                  f"engine at unix://{proxy.path}")
        assert "scripts/ensure-docker.sh" in message and "\n" not in message
        assert run_layout.latest(cfg.output_dir).name == "step-0000002"  # resumable there
        assert [r["step"] for r in read_metrics(cfg.output_dir)] == [1, 2]
        t.close()
    finally:
        proxy.stop()
        sandbox.close()  # cannot reach the engine through the proxy: swept below
        monkeypatch.delenv("DOCKER_HOST")
        real = docker.from_env()
        # The low-level listing, as the sandbox's own: the high-level one inspects each
        # container, and one that auto_remove takes away meanwhile raised NotFound (CI, once).
        for c in real.api.containers(all=True, filters={
                "label": f"{INSTANCE_LABEL}={sandbox.instance}"}):
            remove_container(real, c["Id"])  # auto_remove may already be removing it (409)
        real.close()


class LostClusterScorer:
    """A stand-in for ``RayScorer`` whose cluster went away: every sample comes back as an
    infrastructure error and ``unreachable`` says so, as the real one's probe does."""

    def __init__(self, env):
        from envs.grading import infra_failure_info

        self.env, self.info = env, infra_failure_info

    def score_many(self, tasks, completions):
        return [(0.0, self.info(self.env, t, "no grading actor is alive on the Ray cluster"))
                for t in tasks]

    def unreachable(self):
        return "cannot reach the Ray cluster at 10.0.0.1:6379 (nothing answers)"


def test_a_ray_cluster_that_goes_away_stops_the_run_too(tmp_path):
    from learner.training.trainer import GRPOTrainer

    env = h.ShortEnv()
    cfg = h.config(tmp_path, steps=3, eval=False)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=env,
                    scorer=LostClusterScorer(env))
    with pytest.raises(GradingOutage, match="step 1 of 3: cannot reach the Ray cluster"):
        t.train()
    assert run_layout.latest(cfg.output_dir).name == "step-0000001"


class OneLostContainerEnv(h.ShortEnv):
    """Every fourth sample's container is lost (an infra error), the engine answers."""

    count = 0

    def grade(self, task, completion):
        OneLostContainerEnv.count += 1
        if OneLostContainerEnv.count % 4 == 0:
            return {"short": 0.0, "digit": 0.0}, Verdict.fail(
                "sandbox_error", sandbox_error=True, error="container lost")
        return super().grade(task, completion)


def test_a_single_lost_container_is_dropped_and_training_goes_on(tmp_path):
    from learner.training.trainer import GRPOTrainer

    # 2 of 8 samples a step: under a --max-infra-error-rate of 0.3 (the default 0.05 stops it)
    cfg = h.config(tmp_path, steps=2, eval=False, max_infra_error_rate=0.3)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=OneLostContainerEnv())
    t.train()
    rows = read_metrics(cfg.output_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["samples/infra_errors"] == 2 for r in rows)


# -- 2. SIGINT and SIGTERM ---------------------------------------------------------------------
def interrupt(tmp_path: Path, sig: int) -> tuple[subprocess.CompletedProcess, Path, Path]:
    tiny = h.save_tiny(tmp_path / "tiny")
    out = tmp_path / "run"
    argv = cli("--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
               "--steps", "500", "--save-every-minutes", "0", *TINY_RUN)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            # an interactive shell's SIGINT, whatever this process ignores
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not ((out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").stat().st_size) \
            and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), out, tiny


def test_sigint_saves_a_checkpoint_says_how_to_resume_and_the_resume_says_where(tmp_path,
                                                                                capsys):
    done, out, tiny = interrupt(tmp_path, signal.SIGINT)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    saved = run_layout.latest(out)
    step = int(saved.name.split("-")[1])
    assert 1 <= step < 500
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"stopped by SIGINT after step {step} of 500; checkpoint saved; "
                           "resume with: python -m learner.run ")
    assert last.endswith(f"--output-dir {out} --resume")
    assert f"--model {tiny}" in last and "--steps 500" in last
    assert [r["step"] for r in read_metrics(out)] == list(range(1, step + 1))

    # The resume runs in this process (the command's main): no second Python start importing
    # torch and transformers; the thread count it sets is put back.
    import torch

    from learner import run

    register_short()
    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        code = run.main(["--env", h.SHORT_ENV_ID, "--model", str(tiny), "--output-dir", str(out),
                         "--steps", str(step + 1), "--resume", *TINY_RUN])
    finally:
        torch.set_num_threads(threads)
    resumed = capsys.readouterr()
    assert code == 0, resumed.err[-2000:]
    said = [line for line in resumed.out.splitlines() if line.startswith("resumed from")]
    assert said == [f"resumed from step {step} of {step + 1} (checkpoints/{saved.name})"]
    assert [r["step"] for r in read_metrics(out)] == list(range(1, step + 2))


def test_sigterm_stops_the_same_way_with_143(tmp_path):
    done, out, _ = interrupt(tmp_path, signal.SIGTERM)
    assert done.returncode == 143, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "stopped by SIGTERM after step" in done.stderr.strip().splitlines()[-1]
    assert run_layout.latest(out) is not None


def test_a_second_signal_exits_at_once():
    signals = StopSignals()
    signals.handle(signal.SIGINT, None)
    assert signals.requested == signal.SIGINT  # the first one only asks
    with pytest.raises(SystemExit) as exited:
        signals.handle(signal.SIGINT, None)
    assert exited.value.code == 130


# -- 3. --resume without a checkpoint, periodic checkpoints ------------------------------------
def test_resume_without_a_checkpoint_refuses_in_one_line_and_touches_nothing(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    files = {"config.json": json.dumps({"steps": 40}), "metrics.jsonl": '{"step": 1}\n'}
    for name, text in files.items():
        (out / name).write_text(text)
    rc, torch_loaded, err = run_in_child(["--output-dir", str(out), "--resume"])
    assert rc == 1 and not torch_loaded, err
    assert error_lines(err) == [
        f"error: --resume: {out} holds no checkpoint to continue from (only config.json, "
        "metrics.jsonl); pass --overwrite to start the run again there, or choose another "
        "--output-dir"]
    assert {p.name: p.read_text() for p in out.iterdir()} == files

    (out / "final").mkdir()  # a finished run that kept no checkpoint
    rc, _, err = run_in_child(["--output-dir", str(out), "--resume", "--steps", "80"])
    assert rc == 1 and len(error_lines(err)) == 1
    assert "finished and kept no checkpoint" in err and "--keep-final-checkpoint" in err


def test_checkpoints_every_few_minutes_keep_only_the_latest(tmp_path):
    from learner.training.trainer import GRPOTrainer

    # A deadline shorter than any step: every step but the last is due (the last is the end's).
    cfg = h.config(tmp_path, steps=3, eval=False, save_every_minutes=1e-9)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv(),
                    save_at_end=False)
    t.train()
    assert os.listdir(run_layout.checkpoint_dir(cfg.output_dir)) == ["step-0000002"]

    off = h.config(tmp_path / "off", steps=2, eval=False, save_every_minutes=0)
    t = GRPOTrainer(off, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv(),
                    save_at_end=False)
    t.train()
    assert run_layout.latest(off.output_dir) is None


# -- 4. disk -----------------------------------------------------------------------------------
def test_a_finished_run_keeps_final_weights_only_unless_asked(tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    from learner import run

    register_short()
    tiny = h.save_tiny(tmp_path / "tiny")
    base = ["--env", h.SHORT_ENV_ID, "--model", str(tiny), *TINY_RUN]
    flags = [*base, "--steps", "1"]
    out = tmp_path / "lean"
    assert run.main([*flags, "--output-dir", str(out)]) == 0
    assert not (out / "checkpoints").exists()
    AutoModelForCausalLM.from_pretrained(out / "final")  # the weights a user loads
    # (after it: what the reward credited, held-out answers and the plots)
    last = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("run folder "))
    assert last.startswith(f"run folder {out}: ") and " MB (final/ " in last
    assert "--keep-final-checkpoint keeps the last one" in last

    kept = tmp_path / "kept"
    assert run.main([*flags, "--output-dir", str(kept), "--keep-final-checkpoint"]) == 0
    assert os.listdir(kept / "checkpoints") == ["step-0000001"]
    assert "checkpoints/ " in next(line for line in capsys.readouterr().out.splitlines()
                                   if line.startswith("run folder "))
    assert run.main([*base, "--steps", "2", "--output-dir", str(kept), "--resume"]) == 0
    assert "resumed from step 1 of 2" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(kept)] == [1, 2]


# -- 5. typos answer before torch loads --------------------------------------------------------
@pytest.mark.parametrize("flags, says", [
    (["--env", "grpo/MathExactt-v0"], "unknown env id 'grpo/MathExactt-v0'. Did you mean: "
                                      "grpo/MathExact-v0?"),
    (["--env-kwargs", '{"pack": "arithh"}'], "arithh"),
    (["--model", "./no-such-model"], "model path './no-such-model' does not exist"),
])
def test_a_misspelled_env_pack_or_model_answers_before_torch_loads(tmp_path, flags, says):
    rc, torch_loaded, err = run_in_child(["--output-dir", str(tmp_path / "run"), *flags])
    assert rc == 1 and not torch_loaded, err
    lines = error_lines(err)
    assert len(lines) == 1 and says in lines[0], err


# -- 6. what the user sees ---------------------------------------------------------------------
def test_the_plan_the_estimate_and_the_eta_are_shown(tmp_path, capsys):
    from learner.training.loop import progress as _progress
    from learner.training.trainer import GRPOTrainer

    cfg = h.config(tmp_path, steps=2, eval=False, progress=True)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ShortEnv())
    t.train()
    seen = capsys.readouterr()
    text = seen.out + seen.err
    assert ("plan: 2 steps, each of 2 prompts x 4 completions (P x G = 8) of up to 8 new "
            "tokens, on ") in text and "(pack arith)" in text
    assert "first step took " in text and "the 1 step left should take about " in text
    assert "eta " in seen.err  # the progress bar's time left
    shown = _progress({"reward/mean": 0.5, "kl": 0.01, "memory/peak_rss_gb": 2.345})
    assert shown["mem"] == "2.3G"
    assert "mem" not in _progress({"reward/mean": 0.5})


def test_no_reward_spread_in_the_first_steps_says_so_with_the_envs_hint(tmp_path, capsys):
    from learner.training.trainer import GRPOTrainer

    cfg = h.config(tmp_path, steps=3, eval=False)
    t = GRPOTrainer(cfg, model=h.model(), tokenizer=h.tokenizer(), env=h.ConstantEnv())
    t.train()  # trains on, all 3 steps
    lines = [line for line in capsys.readouterr().out.splitlines() if "no learning signal" in line]
    assert lines == ["no learning signal yet: in each of the first 3 steps every group's "
                     "completions got the same reward, so their advantages are 0 and the model "
                     "is not yet getting any signal on this task; try an easier pack, or a "
                     "bigger model"]
    assert [r["step"] for r in read_metrics(cfg.output_dir)] == [1, 2, 3]

    t = GRPOTrainer(h.config(tmp_path / "short", steps=3, eval=False), model=h.model(),
                    tokenizer=h.tokenizer(), env=h.ShortEnv())
    t.train()
    assert "no learning signal" not in capsys.readouterr().out


def test_envs_know_what_to_suggest():
    import envs  # noqa: F401

    math = gym.make("grpo/MathExact-v0").unwrapped
    assert math.no_signal_hint().startswith("pack=arith level=1")
    assert "bigger model" in gym.make("grpo/CodeTests-v0").unwrapped.no_signal_hint()
