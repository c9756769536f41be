"""Start-up messages a user cannot act on, silenced one by one (never all warnings).

- TRL 1.16 warns "TRL currently supports vLLM versions from 0.22.0 to 0.31.0" five times when its
  trainers load (``trl.import_utils.is_vllm_available``, called from five modules): our pinned
  pair is trl 1.16 with vLLM 0.32, whose Python API the learner and TRL's colocated mode both
  use, so nothing is wrong to fix.
- vLLM's CPU build logs "Triton is installed, but doesn't include CPU backend. Disabling
  Triton." (``vllm.triton_utils.importing``) when torch's own Triton wheel is present: vLLM
  then runs without it, as it should on a CPU.
- DeepSpeed (in the dev extra) logs "Setting accelerator to CPU. If you have GPU or other
  accelerator, we were unable to detect it." when transformers or TRL import it on a machine
  without a GPU: on a CPU machine that is the expected choice.

Each filter matches one message by its text, so any other warning from the same place still
shows.
"""

from __future__ import annotations

import logging
import warnings

#: The start of TRL's vLLM-version warning (the versions in it follow TRL's release).
TRL_VLLM_VERSION = r"TRL currently supports vLLM versions from "
#: vLLM's logger for the Triton notice, and the notice's start.
VLLM_TRITON_LOGGER = "vllm.triton_utils.importing"
VLLM_TRITON_CPU = "Triton is installed, but doesn't include CPU backend"
#: DeepSpeed's logger, and its notice on a machine without a GPU.
DEEPSPEED_LOGGER = "DeepSpeed"
DEEPSPEED_CPU = "Setting accelerator to CPU. If you have GPU or other accelerator"


class _DropMessage(logging.Filter):
    """Drops the records of one logger whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def silence_trl_vllm_version_warning() -> None:
    """Ignore TRL's vLLM-version ``UserWarning``, and only it."""
    warnings.filterwarnings("ignore", message=TRL_VLLM_VERSION, category=UserWarning)


def _drop(logger_name: str, prefix: str) -> None:
    """Filter one message out of one logger (a filter on the logger itself, which the
    libraries' own logging set-up keeps), once."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _DropMessage) and f.prefix == prefix for f in logger.filters):
        logger.addFilter(_DropMessage(prefix))


def silence_vllm_triton_cpu_notice() -> None:
    """Drop vLLM's "Triton ... doesn't include CPU backend" log line, and only it."""
    _drop(VLLM_TRITON_LOGGER, VLLM_TRITON_CPU)


def silence_deepspeed_cpu_notice() -> None:
    """Drop DeepSpeed's "Setting accelerator to CPU" log line, and only it."""
    _drop(DEEPSPEED_LOGGER, DEEPSPEED_CPU)


def silence_trl_import_noise() -> None:
    """All of the above: what importing TRL's trainers prints on our pinned versions."""
    silence_trl_vllm_version_warning()
    silence_vllm_triton_cpu_notice()
    silence_deepspeed_cpu_notice()
