"""Round trip: a grpo-gym env served by ``python -m envs serve`` and read back through
``grpo/OpenEnv-v0`` grades every completion as in-process ``score`` does.

For each held-out seed, the served task (the server's ``task_id``) is looked up in an in-process
env over the same pack, and completions of mixed quality are graded both ways: a refusal, the
gold, a wrong box, the gold hedged with a second box, the empty string, and the gold with prose
around it. Prints the agreement (reward and ``passed`` equal) per env and in all.

    PYTHONPATH=. python benchmarks/openenv_import_roundtrip.py --seeds 40
"""

from __future__ import annotations

import argparse
import socket
import sys

import gymnasium as gym

import envs  # noqa: F401 - registers the envs

TARGETS = [("grpo/MathExact-v0", "arith"), ("grpo/MathExact-v0", "gsm8k"),
           ("grpo/JsonSchema-v0", "extract")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def completions(gold: str | None) -> list[str]:
    out = ["I do not know.", "\\boxed{0}", ""]
    if gold is not None:
        out += [gold, f"{gold} or \\boxed{{-1}}", f"Working it out step by step.\n\n{gold}"]
    return out


def round_trip(env_id: str, pack: str, seeds: int) -> tuple[int, int, list[str]]:
    port = free_port()
    serve = [sys.executable, "-m", "envs", "serve", env_id, "--pack", pack, "--port", str(port),
             "--no-token"]
    remote = gym.make("grpo/OpenEnv-v0", base_url=f"http://127.0.0.1:{port}", max_turns=1,
                      heldout_size=seeds, launch_command=serve, launch_timeout=300).unwrapped
    local = gym.make(env_id, pack=pack).unwrapped
    agree, total, diffs = 0, 0, []
    try:
        for i in range(seeds):
            task = remote.pack.task_at("test", i)
            served = local.pack.get(remote.score(task, "")[1]["server_task_id"])
            for completion in completions(local.gold_completion(served)):
                reward, info = remote.score(task, completion)
                want, want_info = local.score(served, completion)
                same = reward == want and info["passed"] == want_info["passed"]
                agree, total = agree + same, total + 1
                if not same:
                    diffs.append(f"{served.id} {completion[:40]!r}: {reward} vs {want}")
    finally:
        remote.close()
        local.close()
    return agree, total, diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="held-out seeds per env")
    args = parser.parse_args()
    all_agree = all_total = 0
    for env_id, pack in TARGETS:
        agree, total, diffs = round_trip(env_id, pack, args.seeds)
        all_agree, all_total = all_agree + agree, all_total + total
        print(f"{env_id} {pack}: {agree}/{total} completions graded alike", flush=True)
        for line in diffs[:5]:
            print(f"  differs: {line}")
    print(f"all: {all_agree}/{all_total}")


if __name__ == "__main__":
    main()
