"""Run untrusted programs in isolated Docker containers from a warm pool.

    from sandbox import Sandbox, Limits
    with Sandbox() as sb:
        r = sb.run("print(input())", stdin="hi")
        r.status, r.stdout
"""

from sandbox.base import Sandbox, SandboxUnavailable
from sandbox.limits import Limits, RunResult, Status

__all__ = ["Limits", "RunResult", "Sandbox", "SandboxUnavailable", "Status"]
