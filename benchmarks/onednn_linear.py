"""A GRPO step's generation and loss passes with the Linear layers on torch's BLAS vs oneDNN.

    python benchmarks/onednn_linear.py [--rounds 3 --prompts 4 --group 8 --max-new-tokens 48]

One process, one trainer (the embedded model, grpo/MathExact-v0 arith, beta 0.04 so the
reference pass runs), and for each round both kernels in alternating order: ``generate`` on
the same prompts from the same seed, and the update on one fixed batch with learning rate 0
(every round computes the same step, and both kernels see the same weights). Prints the best
time of each phase per kernel, the ratios, and how far the two kernels' gradient norms and
log-probs are apart (only the summation order differs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/onednn_linear.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the cores this process may use)")
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    args = p.parse_args(argv)

    import gymnasium as gym
    import torch
    from torch import nn

    import envs  # noqa: F401
    from learner.config import Config
    from learner.model import chat_prompt
    from learner.sampling.engine import HFEngine
    from learner.sampling.kernels import onednn_linear
    from learner.sampling.rollout import generate
    from learner.training.trainer import GRPOTrainer

    if not onednn_linear.available():
        sys.exit("error: this torch build has no oneDNN linear")
    warnings.filterwarnings("ignore")
    kwargs = {"pack": "arith", "level": 1}
    cfg = Config(env="grpo/MathExact-v0", env_kwargs=kwargs, model=args.model,
                 output_dir=tempfile.mkdtemp(prefix="onednn-"), steps=1,
                 prompts_per_step=args.prompts, group_size=args.group,
                 max_new_tokens=args.max_new_tokens, learning_rate=1e-30, beta=0.04,
                 eval=False, progress=False, samples_every=0, num_threads=args.threads,
                 score_workers=1, cpu_matmul="torch")
    cfg.validate()
    trainer = GRPOTrainer(cfg, env=gym.make(cfg.env, **kwargs).unwrapped)
    trainer.update.policy_is_reference = False  # the reference pass runs, as in every later step
    models = [trainer.policy, trainer.update.ref_model]
    prompts = [chat_prompt(trainer.tokenizer, trainer.env.prompt(t))
               for t in trainer.stream.take(args.prompts)]
    samples = trainer.collect()
    batch = trainer.batch(samples, trainer.advantages(samples))
    print(f"batch: {len(batch)} rows, {int(batch.loss_mask.sum())} completion tokens; "
          f"threads {torch.get_num_threads()}", flush=True)

    def use(kernel: str) -> None:
        for model in models:
            for m in model.modules():
                if isinstance(m, nn.Linear):
                    m.__class__ = onednn_linear.OneDNNLinear if kernel == "onednn" else nn.Linear

    best: dict[tuple[str, str], float] = {}
    seen: dict[str, dict[str, float]] = {}
    for r in range(args.rounds):
        for kernel in (("torch", "onednn") if r % 2 == 0 else ("onednn", "torch")):
            use(kernel)
            torch.manual_seed(r)
            start = time.perf_counter()
            roll = generate(HFEngine(trainer.policy), trainer.tokenizer, prompts,
                            group_size=args.group, max_new_tokens=args.max_new_tokens)
            gen_s = time.perf_counter() - start
            start = time.perf_counter()
            stats = trainer.update(batch)
            train_s = time.perf_counter() - start
            with torch.no_grad():
                logp, _ = trainer.update.logprobs(trainer.update.model,
                                                  batch.to(trainer.accelerator.device))
            seen[kernel] = {"grad_norm": stats.grad_norm, "logp": logp}
            for phase, s in (("generate", gen_s), ("loss passes", train_s)):
                best[kernel, phase] = min(best.get((kernel, phase), float("inf")), s)
            print(f"round {r + 1} {kernel:6s}: generate {gen_s:.2f} s "
                  f"({roll.generated_tokens} tokens), loss passes {train_s:.2f} s", flush=True)
    for phase in ("generate", "loss passes"):
        t, o = best["torch", phase], best["onednn", phase]
        print(f"{phase}: torch's BLAS {t:.2f} s, oneDNN {o:.2f} s, ratio oneDNN/BLAS {o / t:.2f}")
    total_t = best["torch", "generate"] + best["torch", "loss passes"]
    total_o = best["onednn", "generate"] + best["onednn", "loss passes"]
    print(f"both: ratio oneDNN/BLAS {total_o / total_t:.2f}")
    gn = seen["torch"]["grad_norm"], seen["onednn"]["grad_norm"]
    gap = float((seen["torch"]["logp"] - seen["onednn"]["logp"]).abs().max())
    print(f"agreement: grad norm {gn[0]:.6f} vs {gn[1]:.6f}; largest log-prob gap {gap:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
