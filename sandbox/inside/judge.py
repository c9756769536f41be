"""The trusted side of a test run: the job's main program, which runs the tests and never a line
of the graded program.

The host sends one line with the run's nonce and one with the spec (JSON): the program (and its
``prelude``, the prompt's code that runs in the program's namespace first), the test
set-up (trusted code: the prompt's own helper functions, the tests' imports), the test cases,
the names of the program's functions the tests call (``entry_points``), optional ``variants``
(the same cases again with the entry points bound to other functions of the program), the time
limits and the source of the program's side (``sandbox.inside.candidate``). The judge makes itself
non-dumpable, starts the program in a process of its own and runs each test case here, with
every entry point (and ``candidate``, the first one) bound to a function that sends its
arguments to the program's process and returns what comes back, decoded as plain data
(``plain_data``): the asserts compare genuine builtins, whatever the program did. Expected
values, the other cases and the test source never leave this process.

A case fails with its own reason when its time runs out (``timeout``: the program's process
is killed, and the cases after it fail at once as ``not_run``: a program that hung once costs
one timeout, not one per case; the next variant starts the program afresh), when a value the program returns is
not plain data (``unserializable_return``), when the program's process dies or breaks the
protocol during a call (``program_exited``), when a test argument is not plain data
(``argument_not_plain``: the task cannot be graded this way), or when the test raises
(``failed``); whatever the test code does with the exception, those first four fail the case.

The judge prints one line, ``<nonce> <record>``, and the host trusts nothing else.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from sandbox.inside import frames, no_signals, plain_data

# After these the program's process may be mid-message or stuck: it is replaced.
BREAKING = ("timeout", "program_exited")


class CaseTimeout(BaseException):
    """The case's time ran out (a BaseException, so a test's ``except Exception`` keeps out)."""


class ProgramGone(BaseException):
    """The program's process died or broke the protocol during a call."""


class UnserializableReturn(BaseException):
    """The program returned a value that is not plain data."""


class ProgramError(Exception):
    """An exception of a class of the program's own (only its name and message cross)."""


def _why(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    except BaseException:  # noqa: BLE001
        return type(exc).__name__


def _nondumpable() -> bool:
    """The program (same user) can then neither trace this process nor read its memory or
    file descriptors through /proc."""
    try:
        import ctypes

        return ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE 0
    except Exception:  # noqa: BLE001
        return False


def _exception(name: str, message: str) -> Exception:
    """The program's exception, rebuilt here: a builtin class by its name, else ProgramError."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - a class whose constructor wants other arguments
            pass
    return ProgramError(f"{name}: {message}")


class Program:
    """The program's process, started afresh after a case that broke it."""

    def __init__(self, spec: dict[str, Any]):
        self.source = spec["program"]
        self.prelude = spec.get("prelude") or ""
        self.boot = spec["candidate_source"]
        self.proc: subprocess.Popen | None = None
        self.req = self.rep = -1
        self.seq = 0
        self.guarded = False
        self.broken = False  # out of step with its channel: replace it before the next case

    def start(self, deadline: float) -> str | None:
        """Start and load the program; the load error, or None."""
        req_r, self.req = os.pipe()
        self.rep, rep_w = os.pipe()
        judge = os.getpid()
        try:
            try:
                # The filter goes in between fork and exec: no line of the program runs
                # without it (and this process's memory is gone with the exec).
                self.proc = self._spawn(req_r, rep_w, lambda: no_signals.install(judge))
                self.guarded = no_signals.supported()
            except subprocess.SubprocessError:  # the kernel refused the filter
                self.proc = self._spawn(req_r, rep_w, None)
                self.guarded = False
        except OSError as exc:
            return f"cannot start the program: {exc}"
        finally:
            os.close(req_r)
            os.close(rep_w)
        try:
            frames.write(self.req, {"program": self.source, "prelude": self.prelude})
            reply = frames.read(self.rep, deadline)
        except frames.Timeout:
            return "timeout while loading"
        except frames.ChannelClosed:
            return "the program exited while loading"
        if reply.get("op") == "loaded":
            return None
        return str(reply.get("error") or "the program did not load")[:300]

    def _spawn(self, req_r: int, rep_w: int, preexec: Any) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-B", "-E", "-s", "-c", self.boot, str(req_r), str(rep_w)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(req_r, rep_w), start_new_session=True, preexec_fn=preexec,
            cwd="/scratch" if os.path.isdir("/scratch") else None)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            # Its group first (anything it started), then itself if it left the group.
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None
        self.broken = False
        for fd in (self.req, self.rep):
            if fd >= 0:
                os.close(fd)
        self.req = self.rep = -1

    def call(self, name: str, args: tuple, kwargs: dict, deadline: float) -> Any:
        self.seq += 1
        frames.write(self.req, {"op": "call", "seq": self.seq, "name": name,
                                "args": plain_data.to_json(list(args)),
                                "kwargs": plain_data.to_json(kwargs)})
        try:
            reply = frames.read(self.rep, deadline)
        except frames.Timeout:
            raise CaseTimeout() from None
        except frames.FrameTooLarge as exc:
            self.broken = True  # the rest of the frame is still in the pipe
            raise UnserializableReturn(str(exc)) from None
        if not isinstance(reply, dict) or reply.get("seq") != self.seq:
            raise ProgramGone("the program's process ended during the call")
        if "value" in reply:
            try:
                return plain_data.from_json(reply["value"])
            except plain_data.NotPlainData as exc:
                raise UnserializableReturn(str(exc)) from None
        if "raised" in reply and isinstance(reply["raised"], list) and len(reply["raised"]) == 2:
            name, message = (str(x) for x in reply["raised"])
            raise _exception(name, message)
        raise UnserializableReturn(str(reply.get("unencodable", "no value"))[:300])


class Judge:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.program = Program(spec)
        self.running = False
        self.case_deadline = 0.0
        self.case_reason: str | None = None  # set by a call that must fail the case
        self.record: dict[str, Any] = {"compiles": True, "loaded": False, "guarded": False,
                                       "errors": {}, "runs": []}
        self.run_record: dict[str, Any] = {}  # of the variant running now (see ``run``)

    def proxy(self, name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return self.program.call(name, args, kwargs, self.case_deadline)
            except plain_data.Unencodable as exc:
                self.case_reason = "argument_not_plain"
                raise TypeError(f"cannot send {exc} to the program: only plain data "
                                "crosses") from None
            except frames.ChannelClosed:
                self.case_reason = "program_exited"
                raise ProgramGone("the program's process is gone") from None
            except ProgramGone:
                self.case_reason = "program_exited"
                raise
            except UnserializableReturn:
                self.case_reason = "unserializable_return"
                raise
            except CaseTimeout:
                self.case_reason = "timeout"
                raise

        call.__name__ = call.__qualname__ = name
        return call

    def run(self) -> None:
        spec, record = self.spec, self.record
        try:
            compile(spec["program"], "solution.py", "exec")
        except Exception as exc:  # noqa: BLE001 - SyntaxError, ValueError (null bytes), ...
            record["compiles"] = False
            record["errors"]["compile"] = _why(exc)
            return
        deadline = time.monotonic() + spec["budget_s"]
        ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        try:
            exec(compile(spec["setup"], "tests.py", "exec"), ns)
            tests = [compile(t, f"test_{i}.py", "exec") for i, t in enumerate(spec["tests"])]
        except Exception as exc:  # noqa: BLE001 - the task's own code is broken
            record["errors"]["setup"] = _why(exc)
            return
        signal.signal(signal.SIGALRM, self._alarm)
        # Each variant runs every case with the entry points bound to other functions of the
        # program (the trivial baselines of a task, all in one run); by default, themselves.
        for v, variant in enumerate(spec.get("variants") or [{}]):
            self.run_record = {"passed": [], "reasons": {}, "errors": {}}
            record["runs"].append(self.run_record)
            for name in spec["entry_points"]:
                ns[name] = self.proxy(str(variant.get(name, name)))
            if spec["entry_points"]:
                ns["candidate"] = ns[spec["entry_points"][0]]
            for i, test in enumerate(tests):
                if not self._ensure_running(deadline, first=v == 0 and i == 0):
                    reason = "load_error" if not record["loaded"] else "not_run"
                    for j in range(i, len(tests)):
                        self.run_record["reasons"][str(j)] = reason
                    return
                self._case(i, test, ns, min(deadline, time.monotonic() + spec["per_test_s"]))
                if self.run_record["reasons"][str(i)] == "timeout":
                    # One timeout per program, not one per case: a program that hangs would
                    # hang again (``while True: pass`` cost 10 timeouts, 30 s, on one task).
                    for j in range(i + 1, len(tests)):
                        self.run_record["reasons"][str(j)] = "not_run"
                        self.run_record["errors"][str(j)] = "not run: a case ran out of time"
                    break

    def _ensure_running(self, deadline: float, first: bool) -> bool:
        if self.running and self.program.alive():
            return True
        if self.running:  # it died between cases (it killed itself, or its own process group)
            self.program.stop()
            self.running = False
        if time.monotonic() >= deadline:
            return False
        error = self.program.start(deadline)
        if error is not None:
            self.program.stop()
            self.record["errors"].setdefault("load", error)
            return False
        self.running = True
        self.record["guarded"] = self.program.guarded
        if first:
            self.record["loaded"] = True
        return True

    def _alarm(self, signum: int, frame: object) -> None:
        raise CaseTimeout()

    def _case(self, i: int, test: Any, ns: dict[str, Any], deadline: float) -> None:
        self.case_deadline, self.case_reason = deadline, None
        error: str | None = None
        try:
            signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
            try:
                exec(test, dict(ns))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CaseTimeout:
            self.case_reason = "timeout"
        except BaseException as exc:  # noqa: BLE001 - the assert failed, or the test raised
            error = _why(exc)
        reason = self.case_reason or ("failed" if error else "passed")
        self.run_record["reasons"][str(i)] = reason
        if reason == "passed":
            self.run_record["passed"].append(i)
        else:
            self.run_record["errors"][str(i)] = error or reason
        if reason in BREAKING or self.program.broken:
            self.program.stop()
            self.running = False


def main() -> None:
    # Nothing is imported from the scratch space, which the program can write to.
    sys.path[:] = [p for p in sys.path if p and not p.startswith("/scratch")]
    nonce = sys.stdin.readline().strip()
    spec = json.loads(sys.stdin.readline())
    guarded = _nondumpable()
    judge = Judge(spec)
    try:
        judge.run()
    except BaseException as exc:  # noqa: BLE001 - whatever happens, a record goes out
        judge.record["errors"]["judge"] = _why(exc)
    finally:
        judge.program.stop()
    judge.record["guarded"] = judge.record["guarded"] and guarded
    sys.stdout.write(nonce + " " + json.dumps(judge.record) + "\n")
    sys.stdout.flush()
    os._exit(0)
