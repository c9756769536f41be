"""envs.startup_noise silences exactly the start-up messages it names (TRL's
vLLM-version warning, vLLM's Triton notice, DeepSpeed's CPU notice) and nothing else."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings

import pytest

from envs import startup_noise


def test_trl_vllm_version_warning_alone_is_ignored(monkeypatch) -> None:
    import_utils = pytest.importorskip("trl.import_utils")  # the trl extra (dev has it)
    # TRL's own check, fed a vLLM version outside its range, so that it warns whatever is
    # installed here.
    monkeypatch.setattr(import_utils, "_is_package_available",
                        lambda name, return_version=False: (True, "0.99.0"))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        import_utils.is_vllm_available()
        assert [str(w.message) for w in shown][0].startswith("TRL currently supports vLLM")
        shown.clear()
        startup_noise.silence_trl_vllm_version_warning()
        import_utils.is_vllm_available()
        warnings.warn("TRL currently supports something else", UserWarning, stacklevel=1)
        warnings.warn("You have version 0.32.0 installed", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["TRL currently supports something else",
                                               "You have version 0.32.0 installed"]


@pytest.mark.parametrize("logger_name, message", [
    (startup_noise.VLLM_TRITON_LOGGER,
     "Triton is installed, but doesn't include CPU backend. Disabling Triton."),
    (startup_noise.DEEPSPEED_LOGGER,
     "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to "
     "detect it."),
])
def test_log_notice_alone_is_dropped(logger_name, message) -> None:
    logger, child = logging.getLogger(logger_name), logging.getLogger(logger_name + ".child")
    before = list(logger.filters)
    # Start from a logger without our filter (another test, or an import, may have added it).
    logger.filters[:] = [f for f in before if not isinstance(f, startup_noise._DropMessage)]
    others = len(logger.filters)
    shown: list[str] = []
    # A handler on the logger itself: vLLM's and DeepSpeed's loggers need not propagate.
    handler = logging.Handler()
    handler.emit = lambda record: shown.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        startup_noise.silence_trl_import_noise()
        startup_noise.silence_trl_import_noise()  # once is enough: no second filter
        assert len(logger.filters) == others + 1
        logger.warning(message)
        logger.warning("Triton kernels failed to load")  # another message of that logger
        child.propagate = True
        child.warning(message)  # a filter is the logger's own: a child's record passes
        assert shown == ["Triton kernels failed to load", message]
    finally:
        logger.filters[:] = before
        logger.removeHandler(handler)


@pytest.mark.slow
def test_importing_trls_trainers_after_the_integration_prints_none_of_them() -> None:
    pytest.importorskip("trl")
    code = ("import envs.tools.integrations.trl\n"
            "from trl import GRPOConfig, GRPOTrainer\n"
            "import warnings; warnings.warn('a warning of our own', UserWarning)\n")
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                         text=True, timeout=300, check=True)
    out = run.stdout + run.stderr
    assert "a warning of our own" in out  # warnings still show
    for text in ("TRL currently supports vLLM", startup_noise.VLLM_TRITON_CPU,
                 startup_noise.DEEPSPEED_CPU):
        assert text not in out, out[-2000:]
