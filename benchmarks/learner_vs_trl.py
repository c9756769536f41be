"""Our GRPO step against TRL's ``GRPOTrainer`` on the same model, reward, P, G, T, LR and steps.

    python benchmarks/learner_vs_trl.py [--steps 4 --prompts 4 --group 8 --max-new-tokens 48]

Both run in this one process, one after the other, on the embedded SmolLM2-135M-Instruct
(or --model) over grpo/MathExact-v0 with the arith pack, with the same torch thread count.
TRL keeps its own defaults for everything not listed above, except gradient checkpointing,
which is off in both (TRL turns it on by default; ``--trl-gradient-checkpointing`` keeps it);
both use beta, loss type and reward scaling given here. Prints per-step time, reward, the
speed ratio, and generation vs training tokens/s for ours.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings

import gymnasium as gym
import torch
from accelerate.state import AcceleratorState

import envs  # noqa: F401  (registers the envs)
from learner.config import Config
from learner.model import load_model, load_tokenizer
from learner.trainer import GRPOTrainer, cpu_threads


def run_ours(args, env, tokenizer) -> dict:
    cfg = Config(env="grpo/MathExact-v0", env_kwargs=env_kwargs(args), model=args.model,
                 output_dir=tempfile.mkdtemp(prefix="ours-"), steps=args.steps,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=args.lr, beta=args.beta,
                 loss_type=args.loss_type, eval=False, progress=False, samples_every=0,
                 seed=args.seed, num_threads=args.threads)
    trainer = GRPOTrainer(cfg, model=load_model(args.model), tokenizer=tokenizer, env=env)
    rows = [trainer.train_step() for _ in range(args.steps)]
    return {
        "step_s": [r["time/step_s"] for r in rows],
        "reward": [r["reward/mean"] for r in rows],
        "generate_tokens_per_s": [r["tokens_per_s/generate"] for r in rows],
        "train_tokens_per_s": [r["tokens_per_s/train"] for r in rows],
        "generate_s": [r["time/generate_s"] for r in rows],
        "train_s": [r["time/train_s"] for r in rows],
    }


def run_trl(args, env, tokenizer) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLGRPOTrainer

    n = args.prompts * args.steps
    tasks = [env.pack.task_at("train", i + args.seed * 1_000_003) for i in range(n)]
    data = Dataset.from_list([
        {"prompt": [{"role": "user", "content": env.prompt(t)}], "task_id": t.id} for t in tasks
    ])

    def env_reward(prompts, completions, task_id, **_):
        return [env.score(tid, c[0]["content"])[0] for tid, c in zip(task_id, completions,
                                                                      strict=True)]

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self._t = [], 0.0

        def on_step_begin(self, *a, **k):
            self._t = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self._t)

    timer = StepTimer()
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-"), max_steps=args.steps,
        per_device_train_batch_size=args.prompts * args.group, num_generations=args.group,
        max_completion_length=args.max_new_tokens, learning_rate=args.lr, beta=args.beta,
        loss_type=args.loss_type, temperature=1.0, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, seed=args.seed, shuffle_dataset=False,
        lr_scheduler_type="constant", warmup_steps=0, adam_beta2=0.99, weight_decay=0.0,
        disable_tqdm=True, bf16=False,  # fp32 on CPU, as ours
        gradient_checkpointing=args.trl_gradient_checkpointing,
    )
    trainer = TRLGRPOTrainer(model=load_model(args.model), reward_funcs=env_reward, args=config,
                             train_dataset=data, processing_class=tokenizer, callbacks=[timer])
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"step_s": timer.times, "reward": rewards}


def env_kwargs(args) -> dict:
    return {"pack": "arith", "level": args.level}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--loss-type", default="grpo")
    p.add_argument("--level", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: idle cores)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true",
                   help="leave TRL's default gradient checkpointing on (ours runs without)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    args.threads = args.threads or cpu_threads()
    torch.set_num_threads(args.threads)
    env = gym.make("grpo/MathExact-v0", **env_kwargs(args)).unwrapped
    tokenizer = load_tokenizer(args.model)
    torch.manual_seed(args.seed)
    trl = run_trl(args, env, tokenizer)
    AcceleratorState._reset_state(reset_partial_state=True)  # TRL's Trainer configured it
    torch.manual_seed(args.seed)
    ours = run_ours(args, env, tokenizer)
    # The first step of each includes warm-up (allocations); compare the median step.
    t_trl, t_ours = statistics.median(trl["step_s"]), statistics.median(ours["step_s"])
    print(f"setup: P={args.prompts} G={args.group} T={args.max_new_tokens} lr={args.lr} "
          f"beta={args.beta} loss={args.loss_type} steps={args.steps} threads={args.threads}")
    print(f"TRL  step time: median {t_trl:7.1f} s  per step {fmt(trl['step_s'])}")
    print(f"ours step time: median {t_ours:7.1f} s  per step {fmt(ours['step_s'])}")
    print(f"ratio ours/TRL: {t_ours / t_trl:.2f}  (speed-up x{t_trl / t_ours:.2f})")
    print(f"TRL  reward per step: {fmt(trl['reward'], 3)}")
    print(f"ours reward per step: {fmt(ours['reward'], 3)}")
    print(f"ours generation tokens/s: {fmt(ours['generate_tokens_per_s'])}; "
          f"training tokens/s: {fmt(ours['train_tokens_per_s'])}")
    print(f"ours generate s: {fmt(ours['generate_s'])}; train s: {fmt(ours['train_s'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "trl": trl, "ours": ours}, f, indent=1)


def fmt(values, digits: int = 1) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


if __name__ == "__main__":
    main()
