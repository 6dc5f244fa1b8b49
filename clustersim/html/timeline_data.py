"""The simulated step's timeline as lanes of blocks, small enough for a page.

A lane is one stream (compute, pp, dp) of one pipeline stage, as in the Perfetto trace
(clustersim/trace.py), with a further lane for a segment that starts while another of its stream
is still running (DualPipe's sends in two directions at once: "stage 0 pp 2", the trace's rule). A block is one segment of the event engine's timeline
(clustersim/engine/timeline.py), or, when the step has more segments than ``max_blocks``, a run
of consecutive segments of one lane merged into one block:

* the resolution ``res_s`` is the finest of ``step_time_s / 2**k`` (k = 24, 23, ..., 0) at which
  the merged timeline has at most ``max_blocks`` blocks (one window per step, k = 0, always fits
  unless there are more lanes than that);
* walking each lane in time order, a segment joins the current block while the block would
  still span at most ``res_s``; a segment longer than ``res_s`` is always a block of its own;
* a merged block keeps its start, its end, the seconds of each cause inside it (shown on
  hover), the cause with the most seconds (its colour) and the share of its span that is busy
  (its opacity), so idle gaps inside it stay visible as paler blocks.

Every segment longer than the resolution is drawn exactly; totals by cause are kept exactly.
The result depends only on the segments (sorted by lane, start, end, name): the same step gives
the same blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clustersim.engine.timeline import CAUSES, Segment, first_free_lanes

STREAMS = ("compute", "pp", "dp")  # lane order inside a stage (the trace's order: compute, dp, pp)
MAX_BLOCKS = 8_000  # the 16,384-GPU Llama-3-405B page: about 2 MB, opens in about 2 s (benchmarks/bench_html.py)
_FINEST_LEVEL = 24   # step / 2**24: far below a pixel at any zoom a person uses


@dataclass(frozen=True, slots=True)
class Block:
    lane: int                              # index into TimelineData.lanes
    start_s: float
    end_s: float
    cause: str                             # the cause with the most seconds in the block
    name: str                              # the segment's name, or "N segments: first ... last"
    segments: int                          # how many segments the block stands for
    busy_s: float                          # seconds of segments inside the block
    by_cause: tuple[tuple[str, float], ...]  # seconds per cause, in CAUSES order, nonzero only


@dataclass(frozen=True, slots=True)
class TimelineData:
    lanes: tuple[str, ...]                 # "stage 0 compute", ...
    blocks: tuple[Block, ...]
    raw_segments: int
    resolution_s: float                    # 0.0: every segment drawn as it is
    step_time_s: float


def stream_key(seg: Segment) -> tuple[int, int, str]:
    """(stage, order, stream): compute, pp, dp first, then any other stream by name (the engine
    may add streams, e.g. ZeRO-3's reduce-scatter stream "rs")."""
    return seg.rank, STREAMS.index(seg.stream) if seg.stream in STREAMS else len(STREAMS), seg.stream


def _by_lane(segments: Iterable[Segment]) -> dict[tuple[int, int, str, int], list[Segment]]:
    """Each stream's segments, on the first of its lanes that is free when a segment starts
    (``engine.timeline.first_free_lanes``, the Perfetto trace's rule): a lane (stream, n) holds no
    two overlapping segments (DualPipe's sends in two directions at once take a second lane)."""
    ordered = sorted(segments, key=lambda s: (*stream_key(s), s.start_s, s.end_s, s.name, s.cause))
    placed = first_free_lanes((stream_key(s), s.start_s, s.end_s) for s in ordered)
    lanes: dict[tuple[int, int, str, int], list[Segment]] = {}
    for s, n in zip(ordered, placed, strict=True):
        lanes.setdefault((*stream_key(s), n), []).append(s)
    return lanes


def _block(lane: int, run: Sequence[Segment]) -> Block:
    if len(run) == 1:
        s = run[0]
        d = s.end_s - s.start_s
        return Block(lane, s.start_s, s.end_s, s.cause, s.name, 1, d, ((s.cause, d),))
    seconds: dict[str, float] = {}
    for s in run:
        seconds[s.cause] = seconds.get(s.cause, 0.0) + (s.end_s - s.start_s)
    order = [c for c in CAUSES if c in seconds] + sorted(c for c in seconds if c not in CAUSES)
    cause = max(order, key=lambda c: seconds[c])  # ties: the first in CAUSES order
    name = f"{len(run)} segments: {run[0].name} ... {run[-1].name}"
    return Block(lane, run[0].start_s, max(s.end_s for s in run), cause, name, len(run),
                 sum(seconds.values()), tuple((c, seconds[c]) for c in order))


def _merge(lane: int, segs: Sequence[Segment], res_s: float) -> list[Block]:
    blocks: list[Block] = []
    run: list[Segment] = []
    for s in segs:
        if run and s.end_s - run[0].start_s <= res_s:
            run.append(s)
            continue
        if run:
            blocks.append(_block(lane, run))
        run = [s]
    if run:
        blocks.append(_block(lane, run))
    return blocks


def _count(segs: Sequence[Segment], res_s: float) -> int:
    n, start = 0, None
    for s in segs:
        if start is not None and s.end_s - start <= res_s:
            continue
        n += 1
        start = s.start_s
    return n


def lane_name(rank: int, stream: str, pp: int, classes: int, lane: int = 0) -> str:
    """A simulated rank's lane: its pipeline stage, and its rank class where there are several
    (faults, mixed GPUs: rank = class x pp + stage; they were all called 'stage r'); a stream's
    second lane and beyond are numbered as the trace's threads ("stage 0 pp 2")."""
    c, p = divmod(rank, pp)
    stream = stream if lane == 0 else f"{stream} {lane + 1}"
    return f"class {c} stage {p} {stream}" if classes > 1 else f"stage {rank} {stream}"


def timeline_data(segments: Sequence[Segment], step_time_s: float, max_blocks: int = MAX_BLOCKS,
                  pp: int = 0) -> TimelineData:
    """Lanes and blocks of a step (module docstring: how segments are merged past ``max_blocks``);
    ``pp``: the pipeline depth, to name the lanes of several rank classes (0: one class)."""
    if max_blocks < 1:
        raise ValueError(f"max_blocks must be >= 1, got {max_blocks}")
    by_lane = _by_lane(segments)
    keys = sorted(by_lane)
    ranks = max((r for r, _, _, _ in keys), default=0) + 1
    classes = -(-ranks // pp) if pp else 1
    names = tuple(lane_name(r, stream, pp or ranks, classes, n) for r, _, stream, n in keys)
    res_s = 0.0
    if len(segments) > max_blocks:
        span = max(step_time_s, max((s.end_s for s in segments), default=0.0))
        # The greedy count never grows with the resolution (a block under a wider window reaches
        # at least as far), so a binary search over the levels finds the finest that fits.
        def fits(level: int) -> bool:
            return sum(_count(by_lane[k], span / 2**level) for k in keys) <= max_blocks

        lo, hi = 0, _FINEST_LEVEL  # level 0 (one window per step) always fits unless lanes > max_blocks
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        res_s = span / 2**lo
    blocks: list[Block] = []
    for i, k in enumerate(keys):
        blocks.extend(_merge(i, by_lane[k], res_s))
    return TimelineData(names, tuple(blocks), len(segments), res_s, step_time_s)
