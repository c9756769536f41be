"""Does GRPO teach the embedded model to use the Python tool? Held-out accuracy before and after.

    python benchmarks/tool_use_grpo.py --budget-min 60 [--also-without-tool]

On ``arith`` at ``--level`` (2: two-digit sums, which the 135M model cannot do in its head) it
measures, on the first ``--eval-size`` held-out tasks, greedy accuracy of the starting model
without the tool (``grpo/MathExact-v0``) and with it (``grpo/MathPython-v0``, with the share of
episodes that call the tool), then trains with GRPO on MathPython for ``--budget-min`` minutes of
wall-clock time (the training loop only; evaluations are outside the budget) and measures again.
Every step's turns, tool-use share, tool errors and reward are printed and logged to
``OUT/with_tool/metrics.jsonl`` (``python -m learner.plot OUT/with_tool`` draws them).
``--also-without-tool`` trains the same budget on MathExact without the tool, for the
like-for-like comparison. ``--require-boxed`` makes both envs credit only a number in
``\\boxed{}``; by default any final-answer style the checker reads counts, with all its rules.
``--tool-reward`` weights the env's ``tool_ok`` component (shaping; accuracy is ``correct`` only).
``OUT/summary.json`` holds the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _pct(value: float | None) -> str:
    """A share as a percentage; "n/a" where none was reported (too many infrastructure
    failures to mean anything)."""
    return "n/a" if value is None else f"{value:.0%}"


def heldout(trainer: Any, env: Any, tasks: list, max_new_tokens: int) -> dict[str, float]:
    """Greedy accuracy on ``tasks``; on a multi-turn env also the tool-use share and turns."""
    from learner.evaluation.heldout import sample
    from learner.training import sharding

    c = trainer.config
    with sharding.full_weights(trainer.accelerator, trainer.update.model) as policy:
        rows = sample(policy, trainer.tokenizer, env, tasks, group_size=1, greedy=True,
                      max_new_tokens=max_new_tokens, batch_size=c.eval_rows,
                      workers=c.score_workers, max_episode_tokens=c.max_episode_tokens,
                      desc="held-out greedy")
    from learner.evaluation.infra import InfraCount, counted_mean

    # An infrastructure failure is a miss, and past 1% of episodes there is no accuracy: the
    # learner's own rule (learner/evaluation/infra.py).
    count = InfraCount.of(rows)
    scored = [r for r in rows if not r["infra_error"]]
    out = {"n": len(rows), "accuracy": counted_mean(rows, lambda r: float(r["passed"])),
           "not_scored": count.failures}
    if count.failures:
        print(f"warning: {count.refusal() or count.note()}", flush=True)
    if scored and "turns" in scored[0]:
        out["tool_use"] = sum((r["tool_calls"] or 0) > 0 for r in scored) / len(scored)
        out["turns"] = sum(r["turns"] or 0 for r in scored) / len(scored)
    out["example"] = rows[0].get("transcript") or rows[0]["completion"]
    return out


def train_for(trainer: Any, minutes: float, out: Path, label: str) -> list[dict[str, Any]]:
    """Steps until ``minutes`` of training time are spent; one printed line per step."""
    from learner.training.run_log import RunLog

    log = RunLog(out, tensorboard=False)
    history, start = [], time.perf_counter()
    while time.perf_counter() - start < minutes * 60 and trainer.step < trainer.config.steps:
        step = trainer.train_step()
        m = step.metrics
        m["elapsed_min"] = (time.perf_counter() - start) / 60
        log.log(trainer.step, m)
        log.samples(trainer.step, step.sample_groups(1))
        history.append(m)
        tool = (f" turns {m['turns/mean']:.2f} tool-use {m['tool/use_frac']:.0%} "
                f"tool-errors {m['tool/error_frac']:.0%}" if "turns/mean" in m else "")
        tool += f" boxed {m['reward/format']:.0%}" if "reward/format" in m else ""
        tool += f" tool-ok {m['reward/tool_ok']:.0%}" if "reward/tool_ok" in m else ""
        print(f"[{label}] step {trainer.step} {m['elapsed_min']:.1f} min reward "
              f"{m['reward/mean']:.3f} accuracy {_pct(m['accuracy'])} group-std "
              f"{m['group/std_mean']:.3f}{tool}", flush=True)
    log.close()
    return history


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/tool_use_grpo.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-min", type=float, default=60.0,
                   help="wall-clock minutes of GRPO training per run (default 60)")
    p.add_argument("--level", type=int, default=2, help="arith level (default 2)")
    p.add_argument("--eval-size", type=int, default=50, help="held-out tasks (default 50)")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=96, help="per turn")
    p.add_argument("--max-episode-tokens", type=int, default=256)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--learning-rate", type=float, default=2e-5)
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature (default 1.0: at 0.7 the starting model boxed "
                        "no answer in 64 episodes, so every group was flat)")
    p.add_argument("--tool-reward", type=float, default=0.1,
                   help="weight of the env's tool_ok component (a call that ran cleanly and "
                        "printed something), shaping for a policy that rarely finds the tool; "
                        "held-out accuracy counts only correct answers (default 0.1, 0: off)")
    p.add_argument("--beta", type=float, default=0.0,
                   help="KL weight (default 0: no reference pass, and a step whose groups "
                        "all scored alike trains nothing, which saves most of a CPU step's "
                        "time while the model rarely gets an answer right)")
    p.add_argument("--grad-accum", type=int, default=4,
                   help="micro-batches per step: a multi-turn completion is long (tool outputs "
                        "included) and the loss pass holds T x vocab logits per row (default 4)")
    p.add_argument("--tool-role", default="auto", choices=("auto", "tool", "ipython", "user"))
    p.add_argument("--require-boxed", action="store_true",
                   help="credit only an answer in \\boxed{} (both envs). Off by default: the "
                        "model states a tool's result in words but boxed none in any of its "
                        "episodes, at the start or after 5 steps; every other checker rule "
                        "applies either way")
    p.add_argument("--also-without-tool", action="store_true",
                   help="also train MathExact (no tool) for the same budget")
    p.add_argument("--only-without-tool", action="store_true",
                   help="train only without the tool (the baseline of an earlier run)")
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--out", default="runs/tool_use_grpo")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.budget_min <= 0 or args.level < 1 or args.eval_size < 1 or args.max_turns < 2:
        p.error("--budget-min > 0, --level >= 1, --eval-size >= 1 and --max-turns >= 2")

    import gymnasium as gym

    import envs  # noqa: F401
    from envs.sandboxes import shared_sandbox
    from sandbox import SandboxUnavailable

    try:  # every tool call runs there: without it each tool episode would go unscored
        shared_sandbox()
    except SandboxUnavailable as exc:
        sys.exit(f"error: {exc}")
    from learner.config import Config
    from learner.evaluation.heldout import heldout_tasks
    from learner.training.trainer import GRPOTrainer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pack = {"pack": "arith", "level": args.level, "require_boxed": args.require_boxed}

    def trainer_for(env_id: str, kwargs: dict, sub: str) -> GRPOTrainer:
        cfg = Config(env=env_id, env_kwargs=kwargs, model=args.model, seed=args.seed,
                     output_dir=str(out / sub), steps=10_000,
                     prompts_per_step=args.prompts_per_step, group_size=args.group_size,
                     max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                     learning_rate=args.learning_rate, beta=args.beta,
                     max_episode_tokens=args.max_episode_tokens, tool_role=args.tool_role,
                     gradient_accumulation_steps=args.grad_accum,
                     eval=False, progress=False, eval_batch_size=16)
        cfg.validate()
        return GRPOTrainer(cfg, env=gym.make(env_id, **kwargs).unwrapped)

    summary: dict[str, Any] = {"settings": vars(args)}
    tool_kwargs = {**pack, "max_turns": args.max_turns}
    if args.tool_reward:
        tool_kwargs["reward_weights"] = {"tool_ok": args.tool_reward}
    tool = trainer_for("grpo/MathPython-v0", tool_kwargs, "with_tool")
    plain_env = gym.make("grpo/MathExact-v0", **pack).unwrapped
    tasks = heldout_tasks(tool.env, args.eval_size)
    t0 = time.perf_counter()
    summary["no_tool_before"] = heldout(tool, plain_env, tasks, args.max_new_tokens)
    summary["tool_before"] = heldout(tool, tool.env, tasks, args.max_new_tokens)
    print(f"held-out before: no tool {_pct(summary['no_tool_before']['accuracy'])}, with the tool "
          f"{_pct(summary['tool_before']['accuracy'])} (tool used in "
          f"{summary['tool_before']['tool_use']:.0%} of episodes) "
          f"[{(time.perf_counter() - t0) / 60:.1f} min]", flush=True)
    if not args.only_without_tool:
        history = train_for(tool, args.budget_min, out / "with_tool", "with tool")
        summary["tool_after"] = heldout(tool, tool.env, tasks, args.max_new_tokens)
        summary["tool_steps"] = len(history)
        summary["tool_history"] = [{k: m.get(k) for k in (
            "elapsed_min", "reward/mean", "accuracy", "turns/mean", "tool/use_frac",
            "tool/error_frac", "group/std_mean", "group/frac_zero_std")} for m in history]
        print(f"held-out after {len(history)} steps with the tool: "
              f"{_pct(summary['tool_after']['accuracy'])} (tool used in "
              f"{summary['tool_after']['tool_use']:.0%})", flush=True)
    del tool
    if args.also_without_tool or args.only_without_tool:
        plain = trainer_for("grpo/MathExact-v0", pack, "without_tool")
        history = train_for(plain, args.budget_min, out / "without_tool", "no tool")
        summary["no_tool_after"] = heldout(plain, plain.env, tasks, args.max_new_tokens)
        summary["no_tool_steps"] = len(history)
        print(f"held-out after {len(history)} steps without the tool: "
              f"{_pct(summary['no_tool_after']['accuracy'])}", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"summary: {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
