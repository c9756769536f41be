"""``plots/`` written during a long run, in the background: ``python -m learner.plot`` in a
child process every ``--plot-every`` steps, so the curves can be looked at before the end
(the end of the run writes them again, in the foreground: ``learner.results``).

A child process, not a call: matplotlib stays out of the training process, and the plot layer
sits above training. One at a time: a step that comes while the last plot is still being
drawn starts none.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


class BackgroundPlots:
    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._child: subprocess.Popen | None = None

    def start(self) -> bool:
        """Start drawing the curves of the steps so far; False when one is still drawing."""
        if self._child is not None and self._child.poll() is None:
            return False
        self._child = subprocess.Popen([sys.executable, "-m", "learner.plot", str(self.run_dir)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True

    def close(self) -> None:
        """Wait for a drawing in progress (the final plots must not race it)."""
        if self._child is not None:
            try:
                self._child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
