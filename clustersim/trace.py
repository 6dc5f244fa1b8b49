"""Chrome / Perfetto trace (JSON object format) of a simulated step.

One process per simulated pipeline rank, one thread per stream (compute, dp, pp, rs: ZeRO-3's
reduce-scatter stream, and pair: the communication stream of an overlapped forward & backward
pair; the engine's STREAMS); timestamps in microseconds. Open in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

from typing import Any

from clustersim.engine.timeline import STREAMS, Timeline
from clustersim.scenario import Scenario


def trace_events(timeline: Timeline, scenario: Scenario, per_rank: dict[str, Any] | None = None) -> dict[str, Any]:
    """``per_rank``: the report's ``faults`` object in per-rank mode (one process per simulated
    rank: pipeline stage p of rank class c is process c * pp + p)."""
    par = scenario.parallel
    events: list[dict[str, Any]] = []
    # rank classes (faults, mixed GPUs): one process per simulated rank, as many as the timeline holds
    # (a mixed cluster without faults has classes too, and its second class's events had no process)
    simulated = max((seg.rank for seg in timeline.segments), default=0) + 1
    classes = len(per_rank["replicas_per_class"]) if per_rank else max(1, -(-simulated // par.pp))
    for r in range(par.pp * classes):
        c, p = divmod(r, par.pp)
        first_gpu = p * par.tp * par.cp * par.dp
        if per_rank:
            n = per_rank["replicas_per_class"][c]
            name = f"class {c} ({n} replica{'' if n == 1 else 's'}) stage {p}"
        elif classes > 1:
            name = f"class {c} stage {p} (replicas on one kind of GPU)"
        else:
            name = f"pipeline stage {r} (rank {first_gpu} and its tp/dp peers)"
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for t, stream in enumerate(STREAMS):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": stream}})
    spans = sorted(timeline.segments, key=lambda s: (s.rank, STREAMS.index(s.stream), s.start_s, s.end_s, s.name))
    for s in spans:
        # both ends rounded to the nanosecond and the duration their difference: rounding the start
        # and the duration apart let an event end 1 ns after the next one on its track began, and
        # Perfetto wants the events of a track to nest
        start_us, end_us = round(s.start_s * 1e6, 3), round(s.end_s * 1e6, 3)
        events.append({"ph": "X", "name": s.name, "cat": s.cause, "pid": s.rank, "tid": STREAMS.index(s.stream),
                       "ts": start_us, "dur": round(end_us - start_us, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"scenario": scenario.name, "generator": "clustersim"}}
