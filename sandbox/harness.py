"""Running a program against test cases in one sandbox run, each case isolated, with a verdict the
program cannot fake by printing, exiting early, monkeypatching or killing the harness.

Inside the sandbox three kinds of process take part:

- the recorder (the run's main program) reads a per-run nonce from stdin, makes itself
  non-dumpable (so the program cannot read its memory or write to its stdout through ``/proc``),
  and starts a *fresh* interpreter for the program, which therefore never holds the nonce;
- that loader reads its whole input (stdin is then at its end), runs the program and the test
  setup once, then forks one child per test case, so a failing or state-mutating case cannot
  affect the others; a child that completes its case writes the case's random token to a result
  pipe with functions captured before the program ran;
- the recorder collects the tokens (only those sent after the loader reported the program
  loaded) until the pipe closes or time runs out, then prints one line, ``<nonce> <json>``. The
  host trusts only that line, never the exit code or other output.

What the program cannot do to the verdict:

- exit early (``sys.exit``, ``SystemExit``, ``os._exit``), print fake results or kill the
  recorder: its cases are left without tokens, or the run without a record, which scores 0;
- patch what the harness or the tests use: the loader keeps everything it needs after the
  program ran in local variables bound before it ran (rebinding ``builtins.bool`` or the
  loader's module globals changes nothing); builtins and the modules the tests import are put
  back after the program loaded and again before every assert; a test sees pristine builtins
  through its own globals, and a builtin the program shadows at module level (``def abs``) is
  hidden from a test that applies it to a result rather than testing it (see
  ``protected_builtins``);
- compare equal to anything: every operand of a comparison in a test, and every assert's
  truth value, must be a *plain* value (see ``strict_asserts``): its type and every type in it
  take their comparison and truth behaviour only from classes that existed before the program
  ran (or that the setup made), so an object whose ``__eq__``, ``__lt__`` or ``__bool__`` the
  program wrote fails the case instead of deciding it.

Residual risk, by design: a program that introspects its own process (frames, ``gc``, at-fork
hooks) can find the tokens of its own run in its own memory; it still cannot see other runs or
the nonce.
"""

from __future__ import annotations

import ast
import builtins
import json
import secrets
import sys
import threading
from dataclasses import dataclass, field

from sandbox.limits import Limits, RunResult

# Names the loader binds in a test's globals (LOADER spells them out too).
VALUE_FUNC = "__grpo_value__"  # checks that a compared value is plain (see strict_asserts)
RESTORE_FUNC = "__grpo_restore__"  # puts builtins and the tests' modules back
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))

RECORDER = r"""
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
    loader.stdin.write((json.dumps({k: spec[k] for k in (
        "program", "setup", "tests", "protect", "modules", "stdlib", "per_test_s", "tokens")})
        + "\n").encode())
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
    elif parts[0] == "P" and len(parts) >= 2 and parts[1] in token_index and record["loaded"]:
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
"""

LOADER = r"""
import builtins, collections, json, os, signal, sys, time


def main():
    # Everything used once the program has run is bound here first: the program can rebind
    # builtins, module attributes and this module's globals, not these locals.
    write, fork, exit_, waitpid, kill, setpgid = (
        os.write, os.fork, os._exit, os.waitpid, os.kill, os.setpgid)
    WNOHANG, ITIMER_REAL, SIGALRM, SIG_DFL = (
        os.WNOHANG, signal.ITIMER_REAL, signal.SIGALRM, signal.SIG_DFL)
    setitimer, set_handler = signal.setitimer, signal.signal
    sleep, monotonic = time.sleep, time.monotonic
    type_, id_, str_, len_, min_, enumerate_, issubclass_ = (
        type, id, str, len, min, enumerate, issubclass)
    dict_, list_, tuple_, set_, frozenset_, deque_ = (
        dict, list, tuple, set, frozenset, collections.deque)
    compile_, exec_, import_ = compile, exec, __import__
    BaseException_, OSError_, ChildProcessError_, AssertionError_ = (
        BaseException, OSError, ChildProcessError, AssertionError)
    dict_get, dict_set, dict_items, dict_copy = dict.get, dict.__setitem__, dict.items, dict.copy
    list_iter, tuple_iter, set_iter, frozenset_iter, deque_iter = (
        list.__iter__, tuple.__iter__, set.__iter__, frozenset.__iter__, deque_.__iter__)
    append, pop, str_startswith, str_endswith = (
        list.append, list.pop, str.startswith, str.endswith)
    mro_of = type.__dict__["__mro__"].__get__
    class_dict = type.__dict__["__dict__"].__get__
    subclasses = type.__subclasses__
    sys_modules, settrace, setprofile = sys.modules, sys.settrace, sys.setprofile

    fd = int(sys.argv[1])
    spec = json.loads(sys.stdin.buffer.read())  # the whole input: stdin is now at its end
    tokens = spec["tokens"]
    missing = object()

    def say(*parts):
        try:
            write(fd, (" ".join(parts).replace("\n", " ") + "\n").encode("utf-8", "replace"))
        except OSError_:
            pass

    def why(exc):
        try:
            return "%s: %s" % (type_(exc).__name__, str_(exc)[:200])
        except BaseException_:
            return "error"

    def all_classes():
        seen, stack = {}, [object]
        while stack:
            c = pop(stack)
            if id_(c) not in seen:
                seen[id_(c)] = c
                try:
                    stack.extend(subclasses(c))
                except BaseException_:
                    pass
        return seen

    # Builtins and the modules the tests import, as they are before the program runs; the
    # standard modules the program imports are imported first too, so their classes are known.
    for name in spec["modules"] + spec["stdlib"]:
        try:
            import_(name)
        except BaseException_:
            pass
    saved = []
    for name in ["builtins", *spec["modules"]]:
        mod = dict_get(sys_modules, name)
        if mod is not None:
            d = type_(mod).__dict__["__dict__"].__get__(mod)
            saved.append((name, mod, d, list_(dict_items(d))))
    pristine_builtins = dict_copy(builtins.__dict__)

    def restore():
        for name, mod, d, items in saved:
            if dict_get(sys_modules, name) is not mod:
                dict_set(sys_modules, name, mod)
            for k, v in items:
                if dict_get(d, k, missing) is not v:
                    dict_set(d, k, v)

    SAFE_DUNDERS = frozenset_((
        "__module__", "__qualname__", "__doc__", "__slots__", "__dict__", "__weakref__",
        "__init__", "__new__", "__repr__", "__str__", "__format__", "__getnewargs__",
        "__match_args__", "__annotations__", "__orig_bases__", "__init_subclass__",
        "__class_getitem__", "__firstlineno__", "__static_attributes__", "__parameters__"))
    trusted = all_classes()

    def class_ok(c):
        if id_(c) in trusted:
            return True
        if id_(type_(c)) not in trusted:
            return False
        for name in class_dict(c):
            if type_(name) is not str_:
                return False
            if (str_startswith(name, "__") and str_endswith(name, "__")
                    and name not in SAFE_DUNDERS):
                return False
        return True

    def plain(v):
        # True when v and everything in it compare and test for truth only through classes
        # the program did not write (a subclass may add methods, not comparisons).
        stack, seen, n = [v], set_(), 0
        while stack:
            x = pop(stack)
            n += 1
            if n > 2000000:
                return False
            t = type_(x)
            if not class_ok(t):
                return False
            for c in mro_of(t):
                if not class_ok(c):
                    return False
            if issubclass_(t, (dict_, list_, tuple_, set_, frozenset_, deque_)):
                if id_(x) in seen:
                    continue
                seen.add(id_(x))
                if issubclass_(t, dict_):
                    for k, val in dict_items(x):
                        append(stack, k)
                        append(stack, val)
                    continue
                it = (list_iter if issubclass_(t, list_) else tuple_iter
                      if issubclass_(t, tuple_) else set_iter if issubclass_(t, set_)
                      else frozenset_iter if issubclass_(t, frozenset_) else deque_iter)
                stack.extend(it(x))
        return True

    def value(v):
        if plain(v):
            return v
        raise AssertionError_("compared a value whose class defines its own comparison")

    ns = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec_(compile_(spec["program"], "solution.py", "exec"), ns)
        restore()
        after_program = dict_copy(ns)
        program_classes = all_classes()
        exec_(compile_(spec["setup"], "tests.py", "exec"), ns)
    except BaseException_ as exc:
        say("E", "load", why(exc))
        exit_(0)
    settrace(None)
    setprofile(None)
    restore()
    for k, c in all_classes().items():  # classes the setup made are trusted too
        if k not in program_classes:
            trusted[k] = c
    setup_bound = {k for k, v in dict_items(ns) if dict_get(after_program, k, missing) is not v}
    say("L")
    for i, test in enumerate_(spec["tests"]):
        pid = fork()
        if pid == 0:
            try:
                setpgid(0, 0)
                set_handler(SIGALRM, SIG_DFL)
                g = dict_copy(ns)
                for name in spec["protect"][i]:
                    if name in g and name not in setup_bound:
                        del g[name]
                g["__builtins__"] = dict_copy(pristine_builtins)
                g["__grpo_value__"] = value
                g["__grpo_restore__"] = restore
                setitimer(ITIMER_REAL, spec["per_test_s"])
                exec_(compile_(test, "test_%d.py" % i, "exec"), g)
                setitimer(ITIMER_REAL, 0)
                say("P", tokens[i])
            except BaseException_ as exc:
                say("E", str_(i), why(exc))
            exit_(0)
        end = monotonic() + spec["per_test_s"] + 0.5
        delay = 0.0005
        while True:
            try:
                got, _ = waitpid(pid, WNOHANG)
            except ChildProcessError_:
                break
            if got:
                break
            if monotonic() > end:
                say("E", str_(i), "timeout")
                try:
                    kill(-pid, 9)
                except OSError_:
                    pass
                try:
                    kill(pid, 9)
                except OSError_:
                    pass
            sleep(delay)
            delay = min_(delay * 2, 0.02)
    exit_(0)


main()
"""


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


_PARSE_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, one at a time: graders run in threads, and CPython 3.11's AST constructor
    keeps a recursion counter that concurrent parses corrupt ("SystemError: AST constructor
    recursion depth mismatch"), which would fail an honest program's grading."""
    with _PARSE_LOCK:
        return ast.parse(source, mode=mode)


def _call(name: str, arg: ast.expr) -> ast.Call:
    return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), [arg], []), arg)


class _Strict(ast.NodeTransformer):
    """Every comparison's operands go through ``VALUE_FUNC`` (identity tests ``is`` / ``is not``
    need no check), so does every assert's truth value, and ``RESTORE_FUNC()`` runs before every
    assert."""

    def visit_Compare(self, node: ast.Compare) -> ast.Compare:
        self.generic_visit(node)
        if all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            return node
        node.left = _call(VALUE_FUNC, node.left)
        node.comparators = [_call(VALUE_FUNC, c) for c in node.comparators]
        return node

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        self.generic_visit(node)
        node.test = self._truth(node.test)
        restore = ast.Expr(ast.Call(ast.Name(RESTORE_FUNC, ast.Load()), [], []))
        return [ast.copy_location(restore, node), node]

    def _truth(self, expr: ast.expr) -> ast.expr:
        if isinstance(expr, ast.BoolOp):
            expr.values = [self._truth(v) for v in expr.values]
            return expr
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            expr.operand = self._truth(expr.operand)
            return expr
        if isinstance(expr, ast.Compare) or (
                isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
                and expr.func.id == VALUE_FUNC):
            return expr  # a comparison of checked values is a plain bool
        return _call(VALUE_FUNC, expr)


def strict_asserts(source: str) -> str:
    """Rewrite a test case so that no value the program made decides a comparison or an
    assert by its own methods: ``assert f(1) == 2`` becomes
    ``__grpo_restore__(); assert __grpo_value__(f(1)) == __grpo_value__(2)`` (the source is
    unchanged if it does not parse)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return source
    return ast.unparse(ast.fix_missing_locations(_Strict().visit(tree)))


def _names_called_in(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def protected_builtins(source: str) -> list[str]:
    """Builtin names a test uses as tools (``abs(f(x) - y)``, ``for _ in range(9)``): the test
    sees the real builtin even where the program defines that name. A builtin name stays the
    program's when the test tests it: called as an assert's (left) operand, where nothing but
    builtins is called (``assert sum(1, 2) == 3`` for a task that asks for ``sum``)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    used = {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in BUILTIN_NAMES}
    tested: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        op, others = (test.left, test.comparators) if isinstance(test, ast.Compare) else (test, [])
        if (isinstance(op, ast.Call) and isinstance(op.func, ast.Name)
                and op.func.id in BUILTIN_NAMES):
            inner = set().union(*(_names_called_in(a) for a in [*op.args, *op.keywords, *others]))
            if inner <= BUILTIN_NAMES:
                tested.add(op.func.id)
    return sorted(used - tested)


def imported_modules(*sources: str) -> list[str]:
    """The modules these sources import."""
    names: set[str] = set()
    for source in sources:
        try:
            tree = parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(names)


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
        "protect": [protected_builtins(t) for t in tests],
        "modules": imported_modules(setup, *tests),
        "stdlib": sorted({m.split(".")[0] for m in imported_modules(program)}
                         & sys.stdlib_module_names),
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
    loaded = bool(record.get("loaded"))
    # No case runs before the program loaded, so a pass without a load is not one.
    passed = [i for i in record.get("passed", []) if isinstance(i, int) and 0 <= i < len(tests)]
    return TestReport(
        n_tests=len(tests),
        passed=sorted(set(passed)) if loaded else [],
        record_found=True,
        compiles=bool(record.get("compiles")),
        loaded=loaded,
        errors={str(k): str(v) for k, v in (record.get("errors") or {}).items()},
        run=run,
    )
