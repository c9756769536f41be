"""The Python tool: a turn that ends with a ```python block runs it in the sandbox.

``PythonTool.find_call(text)`` finds the first complete ```python block of a turn;
``PythonTool.run(code)`` runs it and formats what it printed as the next observation::

    ```output
    82
    ```

Each call is a fresh program in a pristine sandbox job: nothing (variables, imports, files) is
kept from one call to the next, so a call that needs an earlier result must compute it again.
Calls run in the process-wide warm pool (``envs.sandboxes``) under ``Limits`` like any sandbox
job: by default the pool's limits with at most 10 s of wall and CPU time and 64 KiB of output
per stream. The observation keeps stdout then stderr, cut in the middle to ``output_chars``.
A call the sandbox could not run (``sandbox_error``, or no Docker engine) is an infrastructure
failure: ``ToolResult.infra`` is True and the episode ends without a score.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import warnings
from dataclasses import dataclass

from envs.keywords import check_keywords, instance_of, integer_at_least
from envs.sandboxes import acquire_shared, release_shared, sandbox_outage
from envs.spaces import text_problem
from sandbox import Limits, Sandbox, SandboxUnavailable

#: Opening fence ```python (or py / python3) ending its line; the code runs to the next ```.
_OPEN = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)
_FENCE = "```"
TOOL_WALL_S = 10.0
TOOL_OUTPUT_BYTES = 64 * 1024
OUTPUT_CHARS = 1000
#: The least ``output_chars``: room for the cut note and a little output around it.
MIN_OUTPUT_CHARS = 20
#: What the prompt says about the tool: short, with the exact format, which a small model copies.
INSTRUCTIONS = ("You can run Python code. To do so, end your reply with a code block like\n"
                "```python\nprint(12 * 34)\n```\n"
                "and you will see its output. Then give your final answer.")


@dataclass(frozen=True)
class ToolCall:
    start: int  # index of the opening fence
    end: int  # index just after the closing fence
    code: str


@dataclass(frozen=True)
class ToolResult:
    observation: str  # the formatted output ("" when infra)
    status: str  # the sandbox's RunResult.status
    seconds: float
    infra: bool = False  # the sandbox failed, not the code
    error: str = ""  # what went wrong when infra
    printed: bool = False  # the program wrote something to stdout

    @property
    def failed(self) -> bool:
        """The code itself failed: it raised, timed out, ran out of memory or printed too much."""
        return not self.infra and self.status != "ok"


_STATUS_NOTES = {
    "runtime_error": "",  # the traceback in stderr says it
    "timeout": "[stopped: the program ran out of time]",
    "memory_limit": "[stopped: the program ran out of memory]",
    "output_limit": "[stopped: the program printed too much]",
}


class PythonTool:
    """Runs tool calls in ``sandbox`` (default: the shared pool, acquired on first call and
    released by ``close``). ``limits`` default to the sandbox's own with at most
    ``TOOL_WALL_S`` of time and ``TOOL_OUTPUT_BYTES`` per stream, so calls use the warm pool.
    ``output_chars`` bounds the observation. Thread-safe: episodes run calls concurrently."""

    instructions = INSTRUCTIONS

    def __init__(self, *, sandbox: Sandbox | None = None, limits: Limits | None = None,
                 output_chars: int = OUTPUT_CHARS):
        check_keywords("PythonTool", sandbox=(sandbox, instance_of(Sandbox)),
                       limits=(limits, instance_of(Limits)),
                       output_chars=(output_chars, integer_at_least(MIN_OUTPUT_CHARS)))
        self.output_chars = output_chars
        self.limits = limits
        self._given = sandbox
        self._acquired: Sandbox | None = None
        self._lock = threading.Lock()
        self._warned = False

    def __getstate__(self) -> dict:
        # A copy (AsyncVectorEnv, deepcopy) starts without the parent's sandbox or lock.
        state = self.__dict__.copy()
        state.update(_acquired=None, _lock=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @staticmethod
    def find_call(text: str) -> ToolCall | None:
        """The first complete ```python block of ``text`` (linear time, whatever the text)."""
        m = _OPEN.search(text)
        if m is None:
            return None
        close = text.find(_FENCE, m.end())
        if close < 0:
            return None
        return ToolCall(m.start(), close + len(_FENCE), text[m.end():close])

    def outage(self) -> str | None:
        """Why the sandbox the calls run in does not answer at all (``sandbox_outage``)."""
        return sandbox_outage(self._given or self._acquired)

    def _sandbox(self) -> Sandbox:
        if self._given is not None:
            return self._given
        with self._lock:
            if self._acquired is None:
                self._acquired = acquire_shared()
            return self._acquired

    def _limits(self, sandbox: Sandbox) -> Limits:
        if self.limits is not None:
            return self.limits
        pool = sandbox.limits
        return dataclasses.replace(
            pool, wall_s=min(pool.wall_s, TOOL_WALL_S), cpu_s=min(pool.cpu_s, TOOL_WALL_S),
            output_bytes=min(pool.output_bytes, TOOL_OUTPUT_BYTES))

    def run(self, code: str) -> ToolResult:
        """Run ``code`` as a fresh program; never raises for what the code or sandbox does."""
        problem = text_problem(code)
        if problem is not None:  # UTF-8 cannot carry it to the sandbox: the code's own fault
            return ToolResult(self.format("", f"not run: {problem}", "runtime_error"),
                              "runtime_error", 0.0)
        start = time.perf_counter()
        try:
            sandbox = self._sandbox()
            result = sandbox.run(code, limits=self._limits(sandbox))
        except SandboxUnavailable as exc:
            return self._infra(str(exc), time.perf_counter() - start)
        seconds = time.perf_counter() - start
        if result.status == "sandbox_error":
            return self._infra(result.error, seconds)
        return ToolResult(self.format(result.stdout, result.stderr, result.status),
                          result.status, seconds, printed=bool(result.stdout.strip()))

    def _infra(self, error: str, seconds: float) -> ToolResult:
        if not self._warned:  # once per tool: with no engine, every call of a run fails
            self._warned = True
            warnings.warn(f"python tool: the sandbox could not run a call ({error}); such a "
                          "call ends its episode unscored (info['infra_error'] is True).",
                          RuntimeWarning, stacklevel=3)
        return ToolResult("", "sandbox_error", seconds, True, error)

    def format(self, stdout: str, stderr: str, status: str) -> str:
        """The observation: stdout, stderr and a note on a stopped program, in an output fence."""
        parts = [s.rstrip("\n") for s in (stdout, stderr) if s.strip()]
        text = "\n".join(parts)
        if len(text) > self.output_chars:
            cut = len(text) - self.output_chars
            # Head and tail: the start shows what ran, the end holds the error or the result.
            head = text[: self.output_chars // 2]
            tail = text[len(text) - (self.output_chars - len(head)):]
            text = f"{head}\n[... {cut} characters cut ...]\n{tail}"
        note = _STATUS_NOTES.get(status, f"[stopped: {status}]" if status != "ok" else "")
        if note:
            text = f"{text}\n{note}" if text else note
        return f"```output\n{text or '(no output: print what you want to see)'}\n```"

    def close(self) -> None:
        """Release the shared pool if this tool acquired it (a given sandbox is the caller's)."""
        with self._lock:
            if self._acquired is not None:
                self._acquired = None
                release_shared()
