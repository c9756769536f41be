"""Pathological inputs, timeouts from threads, worker restarts and the cache."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import envs.verify.math as m
from envs.verify.math_worker import get_pool

PATHOLOGICAL = [
    r"\boxed{9^{9^{9^{9^9}}}}",
    r"\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}",
    "(" * 10_000 + "1" + ")" * 10_000,
    "x " * 500_000 + "y",  # 1 MB
    "a" * 1_000_000,
    "\x00" * 10_000,
    r"\boxed{100000!}",
    r"\boxed{2^{100000000}}",
    r"\boxed{" + r"\sqrt{" * 500 + "2" + "}" * 500 + "}",
    r"\boxed{" + r"\frac{1}{" * 300 + "1" + "}" * 300 + "}",
    r"\boxed{\frac{1}{0}}",
    r"\boxed{}",
    r"\boxed{\begin{pmatrix}1 & 2 \\ 3}",
    # inputs that once made extraction quadratic
    r"\boxed{" * 6000,
    r"\(" * 20_000,
    r"\[" * 20_000,
    r"\boxed{" * 3000 + "1" + "}" * 3000,
    "$" * 40_000,
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("completion", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_pathological_inputs_fail_cleanly(completion: str) -> None:
    v = m.verify("5", completion, timeout=3.0)
    assert not v.passed and v.score == 0.0
    assert v.reason in ("timeout", "unparseable", "no_answer", "not_equal", "multiple_answers",
                        "malformed_box")


@pytest.mark.timeout(120)
def test_tower_and_huge_factorial_are_unparseable() -> None:
    assert m.verify("5", r"\boxed{9^{9^{9^{9^9}}}}").reason == "unparseable"
    assert m.verify("5", r"\boxed{100000!}").reason == "unparseable"
    assert m.verify("5", "\x00" * 1000).reason == "no_answer"
    assert m.verify(r"\boxed{5}", "answer \x00 is \\boxed{5\x00}").passed


@pytest.mark.timeout(120)
def test_timeout_kills_and_replaces_the_worker() -> None:
    m.clear_cache()
    pool = get_pool()
    assert m.verify(r"\sin^2(x)+\cos^2(x)", "1").passed  # a worker is up
    before = pool.restarts
    # Far too short for any sympy work: the worker is killed mid-check.
    v = m.verify(r"\frac{x^3-1}{x-1}", r"x^2+x+1", timeout=1e-4)
    assert not v.passed and v.reason == "timeout"
    assert pool.restarts == before + 1
    m.clear_cache()
    assert m.verify(r"\frac{x^3-1}{x-1}", r"x^2+x+1").passed  # a fresh worker took over


@pytest.mark.timeout(300)
def test_concurrent_calls_from_many_threads() -> None:
    m.clear_cache()
    cases = [
        (r"\frac{1}{2}", "0.5", True),
        ("x+y=2", "y+x=2", True),
        (r"\sqrt{8}", r"2\sqrt{2}", True),
        ("3", r"\boxed{4}", False),
        (r"(1, 2)", r"(2, 1)", False),
    ]
    results: dict[int, tuple[bool, str]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        gold, pred, _ = cases[i % len(cases)]
        try:
            timeout = 1e-4 if i % 7 == 6 else 20.0
            v = m.verify(gold + " " * (i // len(cases)), pred, timeout=timeout)
            results[i] = (v.passed, v.reason)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 24
    for i, (passed, reason) in results.items():
        expected = cases[i % len(cases)][2]
        if reason == "timeout":
            assert i % 7 == 6 and not passed
        else:
            assert passed == expected, (i, reason)


@pytest.mark.timeout(120)
def test_repeated_pairs_are_cached() -> None:
    m.clear_cache()
    first = m.verify(r"\frac{2}{4}+x", r"x + 0.5")
    info = m.cache_info()
    second = m.verify(r"\frac{2}{4}+x", r"the answer is $x+0.5$")  # same extracted pair
    assert first.passed and second.passed
    assert "cached" not in first.details and second.details.get("cached") is True
    after = m.cache_info()
    assert after["hits"] == info["hits"] + 1 and after["size"] == info["size"]


@pytest.mark.timeout(120)
def test_workers_run_under_a_memory_cap() -> None:
    m.verify("x^2", "x*x")
    pids = get_pool().worker_pids()
    assert pids
    limits = Path(f"/proc/{pids[0]}/limits")
    if not limits.exists():
        pytest.skip("no /proc on this platform")
    line = next(ln for ln in limits.read_text().splitlines() if ln.startswith("Max address space"))
    assert "unlimited" not in line


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, envs.verify.math; print('sympy' in sys.modules)"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "False"


@pytest.mark.timeout(120)
def test_shutdown_then_lazy_restart() -> None:
    m.verify("x^2", "x*x")
    m.shutdown()
    m.clear_cache()
    assert m.verify("x \\cdot x", "x^2").passed  # x \cdot x as an answer is not simplified
