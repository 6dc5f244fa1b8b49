"""Step times of a training run from its TensorBoard event files or a CSV export of them; the
job itself comes from ``--config`` (clustersim.importers.config). docs/calibration.md.

TensorBoard (read with the tensorboard package's own ``EventAccumulator``; optional extra
``clustersim[tensorboard]``): the step-time scalars the frameworks write, in seconds, each the
mean over the steps since the previous point:

* ``iteration-time``: Megatron-LM with ``--log-timers-to-tensorboard`` (megatron/training/
  training.py ``training_log``: ``elapsed_time_per_iteration``, seconds);
* ``time_metrics/end_to_end(s)``: torchtitan (torchtitan/components/metrics.py, the time of
  ``log_freq`` steps / ``log_freq``).

Without either, the wall times of the scalar logged at the most steps (the loss, say) give the
step time: (wall_i - wall_{i-1}) / (step_i - step_{i-1}).

CSV: a ``step`` (or ``iteration``, ``global_step``) column and one of ``step_time_s``,
``step_time_ms``, ``iteration_time_s``, ``iteration_time_ms``; or TensorBoard's own CSV export
(``Wall time,Step,Value``): its Value is taken as seconds when the file is the export of one of
the step-time tags above (TensorBoard names it ``run-RUN-tag-TAG.csv``), else the wall times
give the step times as above.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from pathlib import Path

from clustersim.errors import InputError
from clustersim.importers.common import ImportResult, steady_state

STEP_TIME_TAGS = ("iteration-time", "time_metrics/end_to_end(s)")
STEP_COLUMNS = ("step", "iteration", "global_step")
TIME_COLUMNS = {"step_time_s": 1.0, "step_time_ms": 1e-3, "iteration_time_s": 1.0, "iteration_time_ms": 1e-3}
TB_EXPORT = ("wall time", "step", "value")


def is_tensorboard(path: Path) -> bool:
    return "tfevents" in path.name


def from_wall_times(events: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """(step, seconds per step) between consecutive (step, wall time) points."""
    pts = sorted(dict(events).items())
    return [(s1, (w1 - w0) / (s1 - s0)) for (s0, w0), (s1, w1) in zip(pts, pts[1:], strict=False) if s1 > s0]


def tensorboard_points(path: Path) -> tuple[list[tuple[int, float]], str]:
    """(step, seconds) from a TensorBoard event file or a folder of them, and how they were read."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise InputError("--log", str(path), "a TensorBoard event file read with the optional extra: pip install "
                         "'clustersim[tensorboard]' (the tensorboard package's reader); or a CSV export of the "
                         "step times") from None
    acc = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.SCALARS: 0})
    try:
        acc.Reload()
    except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file: the reader's own error, as bad input
        raise InputError("--log", str(path), f"a TensorBoard event file ({type(exc).__name__}: {exc})") from None
    tags = acc.Tags().get("scalars", [])
    for tag in STEP_TIME_TAGS:
        if tag in tags:
            return [(e.step, float(e.value)) for e in acc.Scalars(tag)], f"scalar {tag!r} (seconds per step)"
    if not tags:
        raise InputError("--log", str(path), "a TensorBoard event file with scalars (this one has none)")
    tag = max(sorted(tags), key=lambda t: len(acc.Scalars(t)))
    points = from_wall_times((e.step, e.wall_time) for e in acc.Scalars(tag))
    return points, f"wall times of scalar {tag!r} (no {' or '.join(STEP_TIME_TAGS)} in the file)"


def csv_points(text: str, source: str) -> tuple[list[tuple[int, float]], str]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InputError("--log", source, "a CSV of step times (it is empty)")
    header = [h.strip().lower() for h in rows[0]]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    step_col = next((header.index(c) for c in STEP_COLUMNS if c in header), None)
    if header[:3] == list(TB_EXPORT):
        tag = re.search(r"tag-(.+)\.csv$", source)
        name = tag.group(1) if tag else ""
        if any(t.replace("/", "_") in name or t in name for t in STEP_TIME_TAGS):
            return [(_int(r[1], source), _float(r[2], source)) for r in body], f"TensorBoard export of {name!r}"
        return (from_wall_times((_int(r[1], source), _float(r[0], source)) for r in body),
                "wall times of a TensorBoard CSV export")
    time_col = next(((header.index(c), scale) for c, scale in TIME_COLUMNS.items() if c in header), None)
    if step_col is None or time_col is None:
        raise InputError("--log", source, f"a CSV of step times with a step column ({', '.join(STEP_COLUMNS)}) and a "
                         f"time column ({', '.join(TIME_COLUMNS)}), or TensorBoard's export (Wall time,Step,Value); "
                         f"its columns are {', '.join(header)}")
    col, scale = time_col
    return [(_int(r[step_col], source), _float(r[col], source) * scale) for r in body], f"column {header[col]}"


def _int(text: str, source: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        raise InputError("--log", source, f"numbers in the step column (got {text!r})") from None


def _float(text: str, source: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError("--log", source, f"numbers in the time columns (got {text!r})") from None


def import_step_series(kind: str, points: list[tuple[int, float]], how: str, source: str,
                       config: tuple[str, str] | None, cluster: str | None, nodes: int | None) -> ImportResult:
    """The run: its job from ``config`` (required), its step time the steady state of ``points``."""
    if config is None:
        raise InputError("--config", None, f"the job of {source} (step times alone do not describe it): the launch "
                         "command line or arguments, a torchtitan TOML, a DeepSpeed JSON or a clustersim scenario")
    if not points:
        raise InputError("--log", source, "step times: at least one step (this file has none)")
    from clustersim.importers.config import import_config
    cfg = import_config(config[0], config[1], cluster, nodes)
    iterations, median = steady_state(points, "--log", source)
    return ImportResult(kind, source, cfg.framework, cfg.scenario, iterations, median, cfg.unknown,
                        notes=[*cfg.notes, f"step times from {how}"])
