"""Run logs: ``metrics.jsonl`` (one line per step), ``samples.jsonl``, ``heldout.jsonl`` (the
held-out completions of each evaluation) and optional TensorBoard."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def _truncate_after(path: Path, step: int) -> None:
    """Drop lines logged after ``step``: a resumed run rewrites them."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line torn by a kill mid-write
            continue
        if row.get("step", 0) <= step:
            kept.append(line)
    tmp = path.with_name(path.name + ".tmp")  # atomic replace: a kill at any time loses nothing
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/inf
    return value


class RunLog:
    def __init__(self, output_dir: str | Path, resume_step: int | None = None,
                 tensorboard: bool = True):
        self.dir = Path(output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.dir / "metrics.jsonl"
        self.samples_path = self.dir / "samples.jsonl"
        self.heldout_path = self.dir / "heldout.jsonl"
        logs = (self.metrics_path, self.samples_path, self.heldout_path)
        for path in logs:
            if resume_step is None:
                path.unlink(missing_ok=True)
            else:
                _truncate_after(path, resume_step)
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                pass
            else:
                self._tb = SummaryWriter(str(self.dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        line = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(line) + "\n")
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, int | float) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def samples(self, step: int, groups: list[dict[str, Any]]) -> None:
        with self.samples_path.open("a") as f:
            for group in groups:
                f.write(json.dumps({"step": step, **group}) + "\n")

    def heldout(self, step: int, records: list[dict[str, Any]]) -> None:
        """One line per held-out task of an evaluation: the greedy completion and its grade, so
        an accuracy can be read back to the answers that earned it."""
        with self.heldout_path.open("a") as f:
            for record in records:
                f.write(json.dumps({"step": step, **record}) + "\n")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_log(path: str | Path) -> list[Any]:
    """Every complete line of a run log (``metrics``, ``samples``, ``heldout.jsonl``); a line
    torn by a kill mid-write is skipped. Raises FileNotFoundError for a missing log."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def read_metrics(output_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete step line of ``metrics.jsonl`` (``read_log``)."""
    return [row for row in read_log(Path(output_dir) / "metrics.jsonl")
            if isinstance(row, dict) and "step" in row]
