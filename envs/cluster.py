"""The learner's door to the verification cluster (layers: learner > envs > sandbox).

``check_address`` checks a ``--ray-address`` without importing Ray; ``RayUnavailable`` is what
joining a cluster that cannot be reached raises. Both belong to the sandbox's Ray backend; the
learner reaches them through envs, as it reaches grading itself (``envs.ray_scoring``).
"""

from __future__ import annotations

from sandbox.ray_address import check_address


def ray_unavailable() -> type[Exception]:
    """The exception a cluster that cannot be reached raises (imports Ray, so only on demand)."""
    from sandbox.ray_cluster import RayUnavailable

    return RayUnavailable


__all__ = ["check_address", "ray_unavailable"]
