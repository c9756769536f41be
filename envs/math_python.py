"""grpo/MathPython-v0: MathExact's packs and checker, with a sandboxed Python tool.

An episode has up to ``max_turns`` turns (default 4). A turn that ends with a ```python block and
boxes no answer before it runs the block in the sandbox (``envs.python_tool``: a fresh program
each call, nothing kept between calls) and gets its output back as the next observation; a turn
with a ``\\boxed{}`` answer, or without a tool call, is graded and ends the episode. Only that
final turn is graded, alone, by MathExact's checker with every soundness rule (restated
question, several answers, malformed box), against the pack's question without the tool text.

``require_boxed`` defaults to True here: the box is what ends an episode, so it is also the only
answer credited (a turn at the turn limit that prints an answer in its code earns nothing).
"""

from __future__ import annotations

from typing import Any, ClassVar

from envs.base import DEFAULT_TOOL_TURNS
from envs.math_exact import MathExactEnv
from envs.python_tool import OUTPUT_CHARS, PythonTool
from sandbox import Limits, Sandbox


class MathPythonEnv(MathExactEnv):
    """Keyword arguments beyond MathExact's: ``max_turns``, ``tool_output_chars`` (the size an
    observation is cut to), ``tool_limits`` (``sandbox.Limits`` of a call) and ``sandbox``
    (a ``Sandbox`` to run calls in instead of the process-wide pool; the caller closes it)."""

    env_id: ClassVar[str] = "grpo/MathPython-v0"
    pack_env: ClassVar[str] = "grpo/MathExact-v0"
    default_pack: ClassVar[str] = "arith"

    def __init__(self, *args: Any, max_turns: int = DEFAULT_TOOL_TURNS, require_boxed: bool = True,
                 tool_output_chars: int = OUTPUT_CHARS, tool_limits: Limits | None = None,
                 sandbox: Sandbox | None = None, **kwargs: Any):
        tool = PythonTool(sandbox=sandbox, limits=tool_limits, output_chars=tool_output_chars)
        super().__init__(*args, require_boxed=require_boxed, python_tool=tool,
                         max_turns=max_turns, **kwargs)
