"""Chrome / Perfetto trace (JSON object format) of a simulated step.

One process per simulated pipeline rank, one thread per stream that holds events (compute, dp, pp,
rs: ZeRO-3's reduce-scatter stream, and pair: the communication stream of an overlapped forward &
backward pair; the engine's STREAMS), and a further thread per operation that starts while another
of its stream is still running (``lanes``: "pp 2" for DualPipe's sends in two directions at once),
so that no thread holds two overlapping events; timestamps in microseconds. Open in
https://ui.perfetto.dev or chrome://tracing."""

from __future__ import annotations

from typing import Any

from clustersim.engine.timeline import STREAMS, Timeline, first_free_lanes
from clustersim.scenario import Scenario


def trace_events(timeline: Timeline, scenario: Scenario, per_rank: dict[str, Any] | None = None) -> dict[str, Any]:
    """``per_rank``: the report's ``faults`` object in per-rank mode (one process per simulated
    rank: pipeline stage p of rank class c is process c * pp + p)."""
    par = scenario.parallel
    spans, threads = lanes(timeline)
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
        for tid, thread in sorted(threads.get(r, {}).items()):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": thread}})
    events.extend(spans)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"scenario": scenario.name, "generator": "clustersim"}}


def lanes(timeline: Timeline) -> tuple[list[dict[str, Any]], dict[int, dict[int, str]]]:
    """The complete events, each on the first thread of its rank and stream that is free when it
    begins (``engine.timeline.first_free_lanes``; thread "pp", then "pp 2", "pp 3", ...: a thread
    holds no two overlapping events, which Perfetto would draw as parent and child), and per
    process the threads used (tid: name). The
    stream's first thread keeps tid ``STREAMS.index(stream)``; its n-th has tid
    ``STREAMS.index(stream) + (n - 1) * len(STREAMS)``."""
    events: list[dict[str, Any]] = []
    threads: dict[int, dict[int, str]] = {}
    segments = sorted(timeline.segments, key=lambda s: (s.rank, STREAMS.index(s.stream), s.start_s, s.end_s, s.name))
    # both ends rounded to the nanosecond and the duration their difference: rounding the start
    # and the duration apart let an event end 1 ns after the next one on its track began, and
    # Perfetto wants the events of a track to nest
    times = [(round(s.start_s * 1e6, 3), round(s.end_s * 1e6, 3)) for s in segments]
    placed = first_free_lanes(((s.rank, s.stream), a, b) for s, (a, b) in zip(segments, times, strict=True))
    for s, (start_us, end_us), lane in zip(segments, times, placed, strict=True):
        tid = STREAMS.index(s.stream) + lane * len(STREAMS)
        threads.setdefault(s.rank, {})[tid] = s.stream if lane == 0 else f"{s.stream} {lane + 1}"
        events.append({"ph": "X", "name": s.name, "cat": s.cause, "pid": s.rank, "tid": tid,
                       "ts": start_us, "dur": round(end_us - start_us, 3)})
    return events, threads
