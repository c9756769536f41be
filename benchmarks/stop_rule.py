"""What an answer-end stop rule costs generation: none, the incremental rule, and the rule as it
was (every prefix decoded again at every token).

    python benchmarks/stop_rule.py [--rounds 3 --prompts 4 --group 8 --max-new-tokens 256]

One process, the embedded model (or ``--model``), grpo/MathExact-v0 arith prompts. Each round
runs the arms in alternating order on the same prompts from the same seed. Both rules call the
code env's ``answer_end`` (the end of the first fenced block) on the text, and then say None, so
every arm decodes the same tokens and the rule's whole scanning cost is measured, not the
tokens a firing rule saves. Prints each arm's best generation time and its ratio to no rule,
and the seconds spent inside the rule as a share of the rest of the generation's (on a shared
machine the wall-clock ratio moves with the load; that share hardly does).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/stop_rule.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    args = p.parse_args(argv)

    import gymnasium as gym
    import torch

    import envs  # noqa: F401 - registers grpo/*
    from envs.domains.code_tests import CodeTestsEnv
    from learner.model import chat_prompt, load_model, load_tokenizer
    from learner.sampling.decoding import text_stop
    from learner.sampling.engine import HFEngine
    from learner.sampling.kernels.onednn_linear import route_on_cpu

    warnings.filterwarnings("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    tok, model = load_tokenizer(args.model), load_model(args.model)
    route_on_cpu(model, "onednn")  # as the learner runs it on CPU
    env = gym.make("grpo/MathExact-v0", pack="arith").unwrapped
    prompts = [chat_prompt(tok, env.prompt(env.pack.task_at("train", i)))
               for i in range(args.prompts)]
    answer_end = CodeTestsEnv.__new__(CodeTestsEnv).answer_end  # reads no state

    def scan(text: str) -> None:
        answer_end(text)  # the rule's work, without its stop

    def prefix_stop(row: int, tokens: list[int]) -> int | None:
        scan(tok.decode(tokens, skip_special_tokens=True))  # the rule as it was
        return None

    arms = {"none": None, "incremental": lambda: text_stop(tok, scan),
            "every prefix": lambda: prefix_stop}
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    engine = HFEngine(model)
    budgets = torch.full((args.prompts * args.group,), args.max_new_tokens)
    best: dict[str, float] = {}
    share: dict[str, float] = {}
    order = list(arms)
    print(f"P={args.prompts} G={args.group} T={args.max_new_tokens} "
          f"threads={torch.get_num_threads()}", flush=True)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            make = arms[name]
            # Seconds spent in the rule: a figure the machine's load hardly moves.
            inside = [0.0]
            timed = _timed(make(), inside) if make else None

            torch.manual_seed(r)
            t0 = time.perf_counter()
            with engine.session():
                out = engine.decode(enc["input_ids"], enc["attention_mask"], budgets=budgets,
                                    eos=torch.tensor([-1]), pad_id=tok.pad_token_id,
                                    repeat=args.group, stop=timed)
            s = time.perf_counter() - t0
            best[name] = min(best.get(name, s), s)
            share[name] = max(share.get(name, 0.0), inside[0] / (s - inside[0]))
            print(f"round {r + 1} {name:>12}: {s:6.2f} s, {int(out.lengths.sum())} tokens, "
                  f"{inside[0]:.3f} s in the rule", flush=True)
    for name in order:
        print(f"{name:>12}: best {best[name]:6.2f} s  x{best[name] / best['none']:.3f} "
              f"of no rule; the rule's own time +{100 * share.get(name, 0.0):.2f}% of the "
              f"rest (worst round)", flush=True)
    return 0


def _timed(rule, inside: list[float]):
    def stop(row: int, tokens: list[int]) -> int | None:
        t = time.perf_counter()
        keep = rule(row, tokens)
        inside[0] += time.perf_counter() - t
        return keep
    return stop


if __name__ == "__main__":
    raise SystemExit(main())
