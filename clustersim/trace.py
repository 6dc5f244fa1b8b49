"""Chrome / Perfetto trace (JSON object format) of a simulated step.

One process per simulated pipeline rank, one thread per stream (compute, dp, pp, and rs: ZeRO-3's
reduce-scatter stream); timestamps in
microseconds. Open in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from clustersim.engine.timeline import Timeline
from clustersim.scenario import Scenario

_STREAMS = ("compute", "dp", "pp", "rs")  # clustersim/engine/event.py STREAMS, plus compute and pp


def trace_events(timeline: Timeline, scenario: Scenario, per_rank: dict[str, Any] | None = None) -> dict[str, Any]:
    """``per_rank``: the report's ``faults`` object in per-rank mode (one process per simulated
    rank: pipeline stage p of rank class c is process c * pp + p)."""
    par = scenario.parallel
    events: list[dict[str, Any]] = []
    classes = len(per_rank["replicas_per_class"]) if per_rank else 1
    for r in range(par.pp * classes):
        c, p = divmod(r, par.pp)
        first_gpu = p * par.tp * par.cp * par.dp
        name = (f"class {c} ({per_rank['replicas_per_class'][c]} replicas) stage {p}" if per_rank else
                f"pipeline stage {r} (rank {first_gpu} and its tp/dp peers)")
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for t, stream in enumerate(_STREAMS):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": stream}})
    spans = sorted(timeline.segments, key=lambda s: (s.rank, _STREAMS.index(s.stream), s.start_s, s.end_s, s.name))
    for s in spans:
        events.append({"ph": "X", "name": s.name, "cat": s.cause, "pid": s.rank, "tid": _STREAMS.index(s.stream),
                       "ts": round(s.start_s * 1e6, 3), "dur": round((s.end_s - s.start_s) * 1e6, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"scenario": scenario.name, "generator": "clustersim"}}


def _default_mode() -> int:
    """The permissions a plain open() would give a new file (0666 less the umask): mkstemp's
    0600 would leave a profile or scenario unreadable to the other users of a shared machine."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_output_path(path: str | os.PathLike[str], option: str) -> Path:
    """Fail early (exit 2) on an output file that cannot be written, before any work is done.
    Missing folders are fine (the writers below create them); the nearest existing one must be a
    writable directory, and the file itself, if it exists, a regular file."""
    from clustersim.errors import InputError

    target = Path(path)
    if target.exists() and not target.is_file() or target.is_symlink() and not target.exists():
        raise InputError(option, str(path), "a path to a regular file (this is a directory, a device or a broken link)")
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(option, str(path), "a path in a writable directory (or one that can be created)")
    return target


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write text to ``path`` atomically: a temp file in the same folder, fsync, rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON to ``path`` atomically: a temp file in the same folder, fsync, rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"), sort_keys=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
