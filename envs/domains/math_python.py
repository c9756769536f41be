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

from pathlib import Path
from typing import Any, ClassVar

from envs.base import DEFAULT_TOOL_TURNS
from envs.domains.math_exact import MathExactEnv
from envs.keywords import KeywordError, check_keywords, instance_of, integer_at_least
from envs.python_tool import MIN_OUTPUT_CHARS, OUTPUT_CHARS, PythonTool
from sandbox import Limits, Sandbox


class MathPythonEnv(MathExactEnv):
    """Keyword arguments beyond MathExact's: ``max_turns``, ``tool_output_chars`` (the size an
    observation is cut to), ``tool_limits`` (``sandbox.Limits`` of a call) and ``sandbox``
    (a ``Sandbox`` to run calls in instead of the process-wide pool; the caller closes it)."""

    env_id: ClassVar[str] = "grpo/MathPython-v0"
    recipe_file: ClassVar[Path | None] = Path(__file__).with_name("math_python.toml")
    pack_env: ClassVar[str] = "grpo/MathExact-v0"
    default_pack: ClassVar[str] = "arith"

    def __init__(self, *args: Any, max_turns: int = DEFAULT_TOOL_TURNS, require_boxed: bool = True,
                 tool_output_chars: int = OUTPUT_CHARS, tool_limits: Limits | None = None,
                 sandbox: Sandbox | None = None, **kwargs: Any):
        if "python_tool" in kwargs:  # the tool is this env's own, built from the keywords below
            raise KeywordError(f"{self.env_id}: python_tool is always on here, a PythonTool built "
                               "from tool_output_chars, tool_limits and sandbox; for a tool of "
                               "your own, use grpo/MathExact-v0 with python_tool=")
        # Checked under this env's names before PythonTool checks them under its own.
        check_keywords(self.env_id,
                       tool_output_chars=(tool_output_chars, integer_at_least(MIN_OUTPUT_CHARS)),
                       tool_limits=(tool_limits, instance_of(Limits)),
                       sandbox=(sandbox, instance_of(Sandbox)))
        tool = PythonTool(sandbox=sandbox, limits=tool_limits, output_chars=tool_output_chars)
        super().__init__(*args, require_boxed=require_boxed, python_tool=tool,
                         max_turns=max_turns, **kwargs)
