"""The graded program's process: loads the program, then answers calls of its functions.

Started by the trusted test process (``sandbox.inside.judge``) as a fresh interpreter that never
held a test, an expected value or the run's nonce, under the seccomp filter of ``no_signals``
(protecting the trusted process). Before any of the program's code runs it offers itself first
to the out-of-memory killer. Then, over two pipes:

- ``{"program": source, "prelude": code}`` in; the prelude (the prompt's imports and helper
  functions) then the program run in one namespace, the module ``solution``, not ``__main__``
  (as HumanEval's own harness runs it: a model's ``if __name__ == "__main__":`` block with
  ``unittest.main()``, ``input()`` or ``sys.exit()`` is a demo, not part of the answer);
  ``{"op": "loaded"}`` or
  ``{"op": "load_error", "error": ...}`` out;
- a call, ``{"op": "call", "seq": n, "name": f, "args": [...], "kwargs": {...}}`` in (plain
  data, see ``plain_data``); ``{"seq": n, "value": v}``, ``{"seq": n, "raised": [type,
  message]}`` or ``{"seq": n, "unencodable": why}`` out.

One process serves the cases in order (as HumanEval's own harness runs every assert in one
process); the judge starts a fresh one after a case that timed out, crashed it or got a reply it
could not read.

Nothing here is trusted: the program can rewrite all of it once loaded. The trusted side only
ever reads plain data from it.
"""

from __future__ import annotations

import os
import sys
import types

from sandbox.inside import frames, plain_data


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:300]
    except BaseException:  # noqa: BLE001 - a message whose __str__ fails
        return ""


def _answer(ns: dict, msg: dict) -> dict:
    seq = msg.get("seq")
    try:
        if msg["name"] not in ns:
            raise NameError(f"name {msg['name']!r} is not defined")
        func = ns[msg["name"]]
        args = plain_data.from_json(msg["args"])
        kwargs = plain_data.from_json(msg["kwargs"])
        result = func(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: it is the program's answer
        return {"seq": seq, "raised": [type(exc).__name__, _message(exc)]}
    try:
        return {"seq": seq, "value": plain_data.to_json(result)}
    except BaseException as exc:  # noqa: BLE001 - Unencodable, or a generator that raised
        return {"seq": seq, "unencodable": f"{type(exc).__name__}: {_message(exc)}"}


def main() -> None:
    req, rep = (int(a) for a in sys.argv[1:3])
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")  # out of memory, this process goes first, not the judge
    except OSError:
        pass
    msg = frames.read(req)
    source, prelude = msg["program"], msg.get("prelude") or ""
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module  # what dataclasses, pickle and typing look up
    ns = module.__dict__
    sys.argv[:] = ["solution.py"]
    try:
        # Compiled apart: the program may start with ``from __future__`` imports.
        exec(compile(prelude, "prelude.py", "exec"), ns)
        exec(compile(source, "solution.py", "exec"), ns)
    except BaseException as exc:  # noqa: BLE001 - SystemExit at load is a load error too
        frames.write(rep, {"op": "load_error", "error": f"{type(exc).__name__}: {_message(exc)}"})
        os._exit(0)
    frames.write(rep, {"op": "loaded"})
    while True:
        try:
            msg = frames.read(req)
        except frames.ChannelClosed:
            os._exit(0)
        if msg.get("op") != "call":
            os._exit(0)
        frames.write(rep, _answer(ns, msg))
