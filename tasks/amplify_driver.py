"""The program that ``python -m envs.tools.code_amplify`` runs *inside the sandbox* for one task (its
source is sent as the job; it imports nothing of this project). Never run on the host: it
executes the task's reference solution, its mutants and shallow programs.

stdin: one JSON object

- ``setup``: trusted test set-up (the prompt's helpers, the tests' imports), run once;
- ``names``: the names the tests call (HumanEval's ``candidate``, MBPP's function names);
- ``programs``: sources, the reference first, then its mutants, each defining ``entry``;
- ``shallow``: function bodies over ``args``/``kwargs`` (the shallow programs);
- ``entry``: the function the inputs are passed to;
- ``inputs``: argument tuples, each as the ``repr`` of a tuple of literals;
- ``cases``: the task's own test cases (source), run against every program;
- ``call_s``: seconds one call may take; ``case_s``: one of the task's own cases; ``fast_s``: an input on which the reference takes
  longer is no case (the other programs do not run on it; after ten such inputs the reference
  runs on no more); ``memory_mb``: the address-space bound.

stdout: one JSON line: ``canon`` (per input: ``[status, repr of the reference's value,
seconds]``, status ``ok``, ``error``, ``timeout`` or ``not_literal``), ``agree`` (per
program but the reference, then per shallow program: one character per input, ``1`` when it
returns the reference's value, ``0`` when not, ``-`` where the reference gave none, ``t`` not
run after the program's third timeout) and ``cases`` (per program, reference included, then per
shallow program: one character per test case, ``1`` when it passes, ``0`` when not, ``t`` not
run after its third timeout).
"""

DRIVER = r'''
import ast, copy, json, math, resource, signal, sys, time

spec = json.loads(sys.stdin.read())
sys.setrecursionlimit(4000)
try:
    limit = spec["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except (ValueError, OSError):
    pass


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


signal.signal(signal.SIGALRM, _alarm)
CALL_S = float(spec["call_s"])
CASE_S = float(spec.get("case_s") or CALL_S)  # one of the task's own cases (several calls)


def _stop():
    while True:  # an alarm may land while the timer is being stopped
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        except _Timeout:
            pass


def _timed(fn, args):
    # A repeating timer: code that swallows one alarm gets the next.
    signal.setitimer(signal.ITIMER_REAL, CALL_S, 0.05)
    start = time.perf_counter()
    try:
        return "ok", fn(*args), time.perf_counter() - start
    except _Timeout:
        raise
    except BaseException as exc:  # the program's own failure
        return "error", type(exc).__name__, 0.0
    finally:
        _stop()


def timed(fn, *args, limit=None):
    global CALL_S
    saved, CALL_S = CALL_S, limit or CALL_S
    try:
        return _timed(fn, args)
    except _Timeout:
        _stop()
        return "timeout", None, CALL_S
    finally:
        CALL_S = saved


def plain(value, depth=0):
    if depth > 20:
        return False
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) in (list, tuple):
        return all(plain(v, depth + 1) for v in value)
    if type(value) in (set, frozenset):
        return type(value) is set and len(value) > 0 and all(plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in value.items())
    return False


def same(got, want):
    if type(want) is float:
        return (type(got) in (int, float) and not isinstance(got, bool)
                and abs(got - want) <= 1e-6 * max(1.0, abs(want)))
    try:
        return bool(got == want)  # as the judge's ``==`` compares
    except BaseException:
        return False


base = {"__name__": "amplify_tests"}
exec(compile(spec["setup"], "<setup>", "exec"), base)
entry, names = spec["entry"], spec["names"]
functions = []
for k, source in enumerate(spec["programs"]):
    ns = {"__name__": "solution"}
    try:
        exec(compile(source, f"<program {k}>", "exec"), ns)
        functions.append(ns.get(entry))
    except BaseException:
        functions.append(None)
for k, body in enumerate(spec["shallow"]):
    ns = {}
    try:
        exec("def shallow(*args, **kwargs):\n    " + body + "\n", ns)
        functions.append(ns["shallow"])
    except BaseException:
        functions.append(None)

inputs = [ast.literal_eval(text) for text in spec["inputs"]]
canon, values = [], []
ref = functions[0]
FAST_S = float(spec["fast_s"])
slow = 0  # inputs on which the reference ran out of time, or took longer than FAST_S
for args in inputs:
    if ref is None or slow >= 10:
        canon.append(["error" if ref is None else "timeout", None, 0.0])
        values.append(None)
        continue
    status, value, seconds = timed(ref, *copy.deepcopy(args))
    slow += status == "timeout" or seconds > FAST_S
    if status == "ok" and isinstance(value, dict) and type(value) is not dict:
        value = dict(value)  # a Counter or OrderedDict equals the dict it holds
    if status == "ok":
        text = repr(value)
        ok = plain(value) and len(text) <= spec.get("max_chars", 1000)
        if ok:
            try:
                ok = same(ast.literal_eval(text), value)
            except BaseException:
                ok = False
        if not ok:
            status, text = "not_literal", None
        canon.append([status, text, round(seconds, 6)])
        values.append(value if status == "ok" else None)
    else:
        canon.append([status, value, round(seconds, 6)])
        values.append(None)

# A program that runs out of time MAX_TIMEOUTS times runs no more (a mutant whose loop no
# longer ends would otherwise cost a timeout per input). A timeout ("x") and an input it was
# not run on ("t") are unknown, never taken for a failure.
MAX_TIMEOUTS = 3
timeouts = [0] * len(functions)
agree = []
for k, fn in enumerate(functions[1:], start=1):
    row = []
    for args, want, c in zip(inputs, values, canon):
        if c[0] != "ok" or c[2] > FAST_S:  # no value, or too slow to be a case
            row.append("-")
        elif fn is None:
            row.append("0")
        elif timeouts[k] >= MAX_TIMEOUTS:
            row.append("t")
        else:
            status, got, _ = timed(fn, *copy.deepcopy(args))
            timeouts[k] += status == "timeout"
            # A timeout ("x") says nothing of the value: on a loaded machine a mutant as fast
            # as the reference runs out of time too, and taken for a failure it made an
            # equivalent mutant look separable (humaneval/147, mbpp/386, 397).
            row.append("x" if status == "timeout" else
                       "1" if status == "ok" and same(got, want) else "0")
    agree.append("".join(row))

cases = []
timeouts = [0] * len(functions)  # the task's own cases count their own
for k, fn in enumerate(functions):
    row = []
    for case in spec["cases"]:
        if fn is None:
            row.append("0")
            continue
        if k and timeouts[k] >= MAX_TIMEOUTS:
            row.append("t")
            continue
        ns = dict(base)
        for name in names:
            ns[name] = fn

        def run_case(case=case, ns=ns):
            exec(compile(case, "<case>", "exec"), ns)

        # The reference gets the judge's time on its own cases (humaneval/75's takes ~0.1 s
        # a call); an adversary that is slower than a call's limit fails the case.
        status, _, _ = timed(run_case, limit=CASE_S if k == 0 else None)
        timeouts[k] += status == "timeout"
        row.append("1" if status == "ok" else "0")
    cases.append("".join(row))

sys.stdout.write(json.dumps({"canon": canon, "agree": agree, "cases": cases}) + "\n")
'''
