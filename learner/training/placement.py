"""Where a run's tensors live: one device, chosen once from ``--device``, and the Accelerator
built for it. Every tensor of a step is created on ``RunDevice.device``; nothing else in the
learner decides a device (it reads this one, or the tensor it works on).

``auto`` is accelerate's choice (a CUDA GPU where one is visible, else the CPU, or each
process's own GPU under ``accelerate launch``); ``cpu``, ``cuda``, ``cuda:N`` or any torch
device string name one. A device accelerate does not place models on (``cuda:N`` in one
process, ``lazy``, ...) gets the model moved here, and accelerate is told to place nothing.

torch's lazy TorchScript backend (``lazy``) runs on the CPU build and refuses to mix its
tensors with CPU tensors, as CUDA does: the test suite runs whole runs on it to prove that no
step mixes devices on a machine without a GPU.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
from accelerate import Accelerator
from accelerate.utils import GradientAccumulationPlugin, InitProcessGroupKwargs

from learner.env_setup import SetupError

AUTO = "auto"


class DeviceError(SetupError):
    """``--device`` names a device this process cannot use; one line says why."""


def resolve(choice: str) -> torch.device | None:
    """The device ``--device`` names (None: ``auto``, accelerate's choice); a device that
    does not exist here is a ``DeviceError``. ``lazy`` starts torch's lazy backend."""
    if choice == AUTO:
        return None
    try:
        device = torch.device(choice)
    except RuntimeError as exc:
        raise DeviceError(f"--device {choice}: not a torch device ({exc})") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {choice}: no CUDA GPU is visible to this process "
                              "(use --device cpu, or auto)")
        count = torch.cuda.device_count()
        if device.index is not None:
            if device.index >= count:
                raise DeviceError(f"--device {choice}: this process sees {count} CUDA GPU(s), "
                                  f"cuda:0 to cuda:{count - 1}")
            torch.cuda.set_device(device)  # what accelerate and torch call "cuda" from now on
    elif device.type == "lazy":
        _start_lazy_backend()
    elif device.type == "meta":
        raise DeviceError(f"--device {choice}: the meta device holds shapes and no data, so a "
                          "run cannot sample on it (use --device cpu, cuda or auto)")
    elif device.type == "cpu":
        if device.index not in (None, 0):
            raise DeviceError(f"--device {choice}: the CPU has no device index (use --device cpu)")
    else:
        # mps, xpu, hpu, ...: a torch built without the backend fails at the first tensor
        # with a traceback from deep in the model's move; one here says so in a line.
        try:
            torch.empty(1, device=device)
        except Exception as exc:  # RuntimeError, AssertionError, ModuleNotFoundError, ...
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            reason = reason if len(reason) <= 160 else reason[:157] + "..."  # torch's can be 1 kB
            raise DeviceError(f"--device {choice}: this torch cannot use it ({reason}); "
                              "use --device cpu, cuda or auto") from exc
    return device


def _start_lazy_backend() -> None:
    """Start torch's lazy TorchScript backend once per process (a second ``init`` raises)."""
    global _lazy_started
    if _lazy_started:
        return
    try:
        importlib.import_module("torch._lazy.ts_backend").init()
    except RuntimeError as exc:  # started already, by the caller's own code
        if "multiple backend fallbacks" not in str(exc):
            raise
    _lazy_started = True


_lazy_started = False


def settle(device: torch.device) -> None:
    """On the lazy backend, run what was traced so far: its tensors then hold data, and the
    next step's graph starts from them (without it every step would trace, and rerun, all
    the steps before it). Other devices compute eagerly: nothing to do."""
    if device.type == "lazy":
        importlib.import_module("torch._lazy").mark_step()


M = TypeVar("M", bound=torch.nn.Module)


#: The largest model ``--device lazy`` takes. The lazy backend is the tests' stand-in for a GPU:
#: it compiles a graph for every new shape and keeps them, which tiny models (the tests' and
#: gpu_check's rehearsal: under 10M parameters) afford and SmolLM2-135M does not (a 1-step run
#: of 16 new tokens filled 24 GB and was killed).
LAZY_MAX_PARAMETERS = 20_000_000


def moved(model: M, device: torch.device) -> M:
    """``model`` on ``device``, its tied weights tied again: moving to a device whose tensors
    cannot share a CPU tensor's type (lazy) makes each parameter a new one, and the head would
    then train apart from the embeddings. A model over ``LAZY_MAX_PARAMETERS`` is refused on
    the lazy device (``DeviceError``)."""
    if device.type == "lazy":
        count = sum(p.numel() for p in model.parameters())
        if count > LAZY_MAX_PARAMETERS:
            raise DeviceError(
                f"--device lazy: a model of {count / 1e6:.0f}M parameters is over the lazy "
                f"backend's {LAZY_MAX_PARAMETERS // 1_000_000}M (it is the tests' stand-in for a "
                "GPU, and keeps a compiled graph per shape); use --device cpu, or auto")
    model = model.to(device)
    tie = getattr(model, "tie_weights", None)
    if tie is not None:
        tie()
    return model


@dataclass(frozen=True)
class RunDevice:
    """The run's device and its Accelerator; ``place`` is True when the run moves the model
    there itself (accelerate places nothing)."""

    device: torch.device
    accelerator: Accelerator
    place: bool

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def autocast(self) -> str:
        """``--autocast`` as the run has it: bf16 or off (config.json records it)."""
        return "bf16" if self.accelerator.mixed_precision == "bf16" else "off"

    @property
    def computes_on_cpu(self) -> bool:
        """The arithmetic runs on this machine's cores (CPU, or the lazy backend's)."""
        return self.device.type in ("cpu", "lazy")


def mixed_precision(autocast: str, cuda: bool) -> str:
    """accelerate's ``mixed_precision`` for ``--autocast`` (auto: bf16 on a CUDA GPU only)."""
    if autocast == "auto":
        return "bf16" if cuda else "no"
    return "bf16" if autocast == "bf16" else "no"


def make_accelerator(device: torch.device | None = None, autocast: str = AUTO, *,
                     timeout_s: float | None = None) -> Accelerator:
    """The run's Accelerator: bf16 autocast as ``--autocast`` says (auto: on CUDA), several CPU
    processes over gloo, and its gradient accumulation pinned to 1 (see
    ``distributed.check_accumulation``). ``device``: the one ``--device`` named (None:
    accelerate's choice); accelerate places the model on CPU and CUDA devices (``resolve``
    made ``cuda:N`` the current one), the run on any other. ``timeout_s`` (--dist-timeout):
    how long a collective waits for the other processes (None: torch's default)."""
    cuda = torch.cuda.is_available() if device is None else device.type == "cuda"
    # cpu=True lets accelerate run several CPU processes over gloo (its MULTI_CPU mode).
    # DeepSpeed refuses cpu=True; on CPU it is told to use gloo instead.
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true"
    init: dict = {"backend": "gloo"} if deepspeed and not cuda else {}
    if timeout_s:
        init["timeout"] = timedelta(seconds=timeout_s)
    handlers = [InitProcessGroupKwargs(**init)] if init else []
    # A plugin, not gradient_accumulation_steps=1: accelerate lets the environment's
    # ACCELERATE_GRADIENT_ACCUMULATION_STEPS (set by `accelerate launch
    # --gradient_accumulation_steps`) override the argument, but not a plugin.
    return Accelerator(
        mixed_precision=mixed_precision(autocast, cuda), cpu=not (cuda or deepspeed),
        device_placement=device is None or device.type in ("cpu", "cuda"),
        # The scheduler counts optimizer steps (accelerate would step it once per process).
        step_scheduler_with_optimizer=False, kwargs_handlers=handlers,
        gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1))


def run_device(choice: str, accelerator: Accelerator | None = None, autocast: str = AUTO, *,
               timeout_s: float | None = None) -> RunDevice:
    """The run's device for ``--device choice``, with its Accelerator (``accelerator``: the
    caller's, whose mixed precision and process group then stand; with ``auto`` its device is
    the run's; ``timeout_s``: --dist-timeout for one made here)."""
    device = resolve(choice)
    if device is not None and int(os.environ.get("WORLD_SIZE") or 1) > 1 and not (
            device.type in ("cpu", "cuda") and device.index is None):
        raise DeviceError(f"--device {choice}: under accelerate launch each process takes "
                          "its own device; give --device auto, cpu or cuda")
    accelerator = accelerator or make_accelerator(device, autocast, timeout_s=timeout_s)
    if device is None or device.type == accelerator.device.type:
        # accelerate's own (with its index: each process's GPU under accelerate launch), or
        # the cuda:N that ``resolve`` made current
        exact = device if device is not None and device.index is not None else None
        return RunDevice(exact or accelerator.device, accelerator, place=False)
    if accelerator.device_placement:  # a caller's Accelerator would move the model back
        raise DeviceError(f"--device {choice}: the Accelerator given places the model on "
                          f"{accelerator.device}; make it with device_placement=False")
    return RunDevice(device, accelerator, place=True)
