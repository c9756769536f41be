"""The device the check runs on (CUDA, or torch's lazy device for the CPU rehearsal), waiting for
its queued work, its memory figures, and its measured bf16 matmul rate."""

from __future__ import annotations

import time
from typing import Any

import torch


def choose(rehearse: str | None) -> torch.device | None:
    """CUDA where it is visible; for ``--rehearse``, the lazy device or the CPU (None:
    neither)."""
    if rehearse == "lazy":
        from torch._lazy import ts_backend

        ts_backend.init()
        return torch.device("lazy")
    if rehearse:
        return torch.device(rehearse)
    return torch.device("cuda") if torch.cuda.is_available() else None


def synchronize(device: torch.device) -> None:
    """Wait until the work queued on ``device`` has run (a timer must not stop before it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "lazy":
        from torch import _lazy

        _lazy.mark_step()
        _lazy.wait_device_ops()


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gb(device: torch.device) -> float | None:
    """The most bytes allocated since ``reset_peak``, in GB (None where torch does not count)."""
    return torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None


def accelerator_on(device: torch.device) -> tuple[Any, dict[str, Any]]:
    """The learner's own Accelerator (bf16 autocast on CUDA) for a run on ``device``, and the
    keyword arguments that tell ``prepare_policy`` the run's device."""
    try:
        from learner.training import placement
    except ImportError:  # a learner without --device (an older checkout)
        placement = None
    if placement is not None:
        where = placement.run_device(str(device))
        return where.accelerator, {"device": where.device}
    from learner.training import distributed

    accelerator = distributed.make_accelerator()
    if accelerator.device.type != device.type:
        # accelerate knows CPU and CUDA, and resets its shared state's device when it prepares
        # a model: the lazy device is pinned on this one object instead.
        accelerator.__class__ = type("PlacedAccelerator", (type(accelerator),),
                                     {"device": property(lambda self: device)})
    return accelerator, {}


def matmul_tflops(device: torch.device, size: int, runs: int) -> dict[str, float]:
    """bf16 ``size`` x ``size`` matmuls: the card's measured rate, the ceiling MFU is read
    against (2 size^3 FLOPs each)."""
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    for _ in range(2):  # warm-up: kernel choice, allocator
        a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(runs):
        c = a @ b
    synchronize(device)
    seconds = time.perf_counter() - start
    del c
    return {"size": size, "runs": runs, "seconds": round(seconds, 4),
            "tflops": round(2 * size**3 * runs / seconds / 1e12, 3)}
