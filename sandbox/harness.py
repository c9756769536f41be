"""Running a program against test cases in one sandbox run, each case isolated, with a verdict the
program cannot fake by printing, exiting early, monkeypatching or killing the harness.

Inside the sandbox three kinds of process take part:

- the recorder (the run's main program) reads a per-run nonce from stdin, makes itself
  non-dumpable (so the program cannot read its memory or write to its stdout through ``/proc``),
  and starts a *fresh* interpreter for the program, which therefore never holds the nonce;
- that loader runs the program and the test setup once, then forks one child per test case, so a
  failing or state-mutating case cannot affect the others; a child that completes its case
  writes the case's random token to a result pipe with functions captured before the program ran;
- the recorder collects the tokens until the pipe closes or time runs out, then prints one line,
  ``<nonce> <json>``. The host trusts only that line, never the exit code or other output.

A program that exits early, calls ``os._exit``, prints fake results or kills the recorder leaves
its cases without tokens (or no record at all), which scores 0. ``==`` in asserts is checked
strictly: a value equal to a brand-new object (the "always-equal" trick) equals nothing.
Residual risk, by design: a program that reverse-engineers the loader could read the tokens of
its own run from its own process memory; it still cannot see other runs or the nonce.
"""

from __future__ import annotations

import ast
import json
import secrets
from dataclasses import dataclass, field

from sandbox.limits import Limits, RunResult

EQ_FUNC = "__grpo_strict_eq__"

RECORDER = r'''
import json, os, select, subprocess, sys, time
nonce = sys.stdin.readline().strip()
spec = json.loads(sys.stdin.readline())
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
except Exception:
    pass
deadline = time.monotonic() + spec["budget_s"]
record = {"compiles": True, "loaded": False, "passed": [], "errors": {}}
try:
    compile(spec["program"], "solution.py", "exec")
except Exception as exc:  # SyntaxError, ValueError (null bytes), RecursionError ...
    record["compiles"] = False
    record["errors"]["compile"] = "%s: %s" % (type(exc).__name__, exc)
tokens = spec["tokens"]
r, w = os.pipe()
loader = subprocess.Popen(
    [sys.executable, "-B", "-E", "-s", "-c", spec["loader"], str(w)],
    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    pass_fds=[w], start_new_session=True, cwd=os.getcwd())
os.close(w)
try:
    loader.stdin.write((json.dumps({k: spec[k] for k in ("program", "setup", "tests", "per_test_s")})
                        + "\n" + json.dumps(tokens) + "\n").encode())
    loader.stdin.close()
except OSError:
    pass
token_index = {t: i for i, t in enumerate(tokens)}
buf = b""
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        break
    ready, _, _ = select.select([r], [], [], left)
    if not ready:
        break
    chunk = os.read(r, 65536)
    if not chunk:
        break
    buf += chunk
    if len(buf) > 1 << 20:
        break
for line in buf.split(b"\n"):
    parts = line.decode("utf-8", "replace").split(" ", 2)
    if parts[0] == "L":
        record["loaded"] = True
    elif parts[0] == "P" and len(parts) >= 2 and parts[1] in token_index:
        record["passed"].append(token_index[parts[1]])
    elif parts[0] == "E" and len(parts) == 3:
        record["errors"].setdefault(parts[1][:12], parts[2][:300])
try:
    os.killpg(loader.pid, 9)
except OSError:
    pass
loader.wait()
record["passed"] = sorted(set(record["passed"]))
sys.stdout.write(nonce + " " + json.dumps(record) + "\n")
sys.stdout.flush()
'''

LOADER = r'''
import json, os, signal, sys
_write, _fork, _exit, _waitpid, _kill = os.write, os.fork, os._exit, os.waitpid, os.kill
_sleep = __import__("time").sleep
_monotonic = __import__("time").monotonic
_setpgid, _setitimer = os.setpgid, signal.setitimer
_fd = int(sys.argv[1])
_spec = json.loads(sys.stdin.readline())
class _Probe:
    pass

def _fishy(v, depth=0):
    """True for a value equal to a brand-new object: the always-equal trick (also inside
    containers). No honest result equals an object it has never seen."""
    try:
        if v == _Probe():
            return True
        if depth < 20 and isinstance(v, (list, tuple, set, frozenset)):
            return any(_fishy(x, depth + 1) for x in v)
        if depth < 20 and isinstance(v, dict):
            return any(_fishy(x, depth + 1) for x in v.values())
    except Exception:
        return True
    return False

def _strict_eq(a, b):
    if _fishy(a) or _fishy(b):
        return False
    return bool(a == b)

def _say(*parts):
    try:
        _write(_fd, (" ".join(parts).replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass

def _why(exc):
    return "%s: %s" % (type(exc).__name__, str(exc)[:200])

ns = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    exec(compile(_spec["program"], "solution.py", "exec"), ns)
    exec(compile(_spec["setup"], "tests.py", "exec"), ns)
except BaseException as exc:
    _say("E", "load", _why(exc))
    _exit(0)
sys.settrace(None)
sys.setprofile(None)
_tokens = json.loads(sys.stdin.readline())
_say("L")
for _i, _test in enumerate(_spec["tests"]):
    _pid = _fork()
    if _pid == 0:
        try:
            _setpgid(0, 0)
            ns["__grpo_strict_eq__"] = _strict_eq
            _setitimer(signal.ITIMER_REAL, _spec["per_test_s"])
            exec(compile(_test, "test_%d.py" % _i, "exec"), ns)
            _setitimer(signal.ITIMER_REAL, 0)
            _say("P", _tokens[_i])
        except BaseException as exc:
            _say("E", str(_i), _why(exc))
        _exit(0)
    _end = _monotonic() + _spec["per_test_s"] + 0.5
    _delay = 0.0005
    while True:
        try:
            _got, _ = _waitpid(_pid, os.WNOHANG)
        except ChildProcessError:
            break
        if _got:
            break
        if _monotonic() > _end:
            _say("E", str(_i), "timeout")
            try:
                _kill(-_pid, 9)
            except OSError:
                pass
            try:
                _kill(_pid, 9)
            except OSError:
                pass
        _sleep(_delay)
        _delay = min(_delay * 2, 0.02)
_exit(0)
'''


@dataclass(frozen=True)
class TestReport:
    """What the recorder saw; ``record_found`` is False when the run left no trustworthy record."""

    n_tests: int
    passed: list[int] = field(default_factory=list)
    record_found: bool = False
    compiles: bool = False
    loaded: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    run: RunResult | None = None

    @property
    def fraction(self) -> float:
        return len(self.passed) / self.n_tests if self.n_tests else 0.0

    @property
    def sandbox_error(self) -> bool:
        return self.run is not None and self.run.status == "sandbox_error"


class _StrictEq(ast.NodeTransformer):
    """``assert a == b`` -> ``assert __grpo_strict_eq__(a, b)`` (only directly under asserts)."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        node.test = self._rewrite(node.test)
        return node

    def _rewrite(self, expr: ast.expr) -> ast.expr:
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq):
            call = ast.Call(ast.Name(EQ_FUNC, ast.Load()), [expr.left, expr.comparators[0]], [])
            return ast.copy_location(call, expr)
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
            expr.values = [self._rewrite(v) for v in expr.values]
        return expr


def strict_asserts(source: str) -> str:
    """Rewrite the equality checks in a test case's asserts (source unchanged if unparsable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    return ast.unparse(ast.fix_missing_locations(_StrictEq().visit(tree)))


def run_tests(
    sandbox, program: str, tests: list[str], *, setup: str = "", per_test_s: float = 3.0,
    total_s: float = 30.0,
) -> TestReport:
    """Run ``program`` then ``setup`` once, and each test case (source) in its own process.

    Each case may take ``per_test_s``; the whole run at most ``total_s`` (raised to fit two
    cases when ``per_test_s`` is large), after which the remaining cases count as failed.
    """
    budget = min(2.0 + len(tests) * (per_test_s + 0.5), max(total_s, 2.0 + 2 * per_test_s))
    base = sandbox.limits
    limits = Limits(wall_s=budget + 2.0, cpu_s=budget + 2.0, memory_mb=base.memory_mb,
                    pids=base.pids, output_bytes=base.output_bytes, disk_mb=base.disk_mb,
                    cpus=base.cpus)
    nonce = secrets.token_hex(16)
    spec = {
        "program": program,
        "setup": setup,
        "tests": [strict_asserts(t) for t in tests],
        "tokens": [secrets.token_hex(16) for _ in tests],
        "per_test_s": per_test_s,
        "budget_s": budget,
        "loader": LOADER,
    }
    run = sandbox.run(RECORDER, stdin=nonce + "\n" + json.dumps(spec) + "\n", limits=limits)
    record = None
    for line in run.stdout.splitlines():
        if line.startswith(nonce + " "):
            try:
                record = json.loads(line[len(nonce) + 1:])
            except ValueError:
                record = None
    if record is None:
        return TestReport(len(tests), run=run)
    passed = [i for i in record.get("passed", []) if isinstance(i, int) and 0 <= i < len(tests)]
    return TestReport(
        n_tests=len(tests),
        passed=sorted(set(passed)),
        record_found=True,
        compiles=bool(record.get("compiles")),
        loaded=bool(record.get("loaded")),
        errors={str(k): str(v) for k, v in (record.get("errors") or {}).items()},
        run=run,
    )
