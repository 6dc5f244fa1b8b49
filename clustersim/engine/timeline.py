"""What happened in a simulated step: segments per rank and stream, the breakdown by cause, the results.

Every timing model of the step answers with a ``StepResult``: the event engine with a
``SimResult`` (its timeline), the closed form with a ``ClosedResult``. Both also say, per
simulated rank, when its last action ended and its compute stream's seconds by cause
(``busy``), which per-rank mode reads (clustersim.perrank.run).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# Causes of the critical path (the `breakdown` keys of docs/output.md, plus the optimizer step, host
# offload transfers, in per-rank mode the time lost waiting for slower peers (clustersim.perrank.run),
# the healthy cluster's wait for its slowest GPU (``jitter``, clustersim.compute.variation) and the
# host's share of the step (``host``, clustersim.compute.host)).
CAUSES = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "offload",
          "straggler", "jitter", "host")
# The streams a segment is recorded on (clustersim.engine.event): a rank's kernels, its data-parallel
# and ZeRO-3 reduce-scatter collectives, its pipeline sends, and the communication stream of an
# overlapped forward & backward pair ("pair": the TP, CP and EP collectives of both chains, which run
# beside the kernels; DualPipe, DualPipe-V and parallel.overlap_moe_expert_parallel_comm,
# clustersim.engine.pair).
STREAMS = ("compute", "dp", "pp", "rs", "pair")


def first_free_lanes(items: Iterable[tuple[Hashable, float, float]]) -> list[int]:
    """A lane for each item (group, start, end), walked in the order given (each group's items by
    start): the first lane of its group whose last item ended by the item's start, else a new
    one, so that no lane holds two overlapping items (two of a rank's sends in flight at once on
    DualPipe). The one rule of the Perfetto trace's threads (clustersim.trace.lanes) and the HTML
    timeline's lanes (clustersim.html.timeline_data), each on its own clock (microseconds as the
    trace writes them, seconds)."""
    ends: dict[Hashable, list[float]] = {}
    out = []
    for group, start, end in items:
        last = ends.setdefault(group, [])
        lane = next((i for i, e in enumerate(last) if e <= start), len(last))
        last[lane:lane + 1] = [end]
        out.append(lane)
    return out


# The causes are sums of clock differences and the step an absolute clock, so the two differ by
# rounding (measured over the shipped scenarios and all four timing models: within 4e-14 of the
# step either way); idle time no cause took is counted as bubble only beyond this fraction of the
# step, so that a job with nothing to wait for (pp 1) reports a bubble of exactly 0.
IDLE_ROUNDING = 1e-9


@dataclass(frozen=True, slots=True)
class Segment:
    rank: int          # simulated rank: pipeline rank (+ pp x class in per-rank mode)
    stream: str        # one of STREAMS
    name: str
    cause: str         # one of CAUSES
    start_s: float
    end_s: float


@dataclass(slots=True)
class Timeline:
    """Append-only record of segments. ``record=False`` keeps only the compute-stream totals."""

    record: bool = True
    segments: list[Segment] = field(default_factory=list)
    totals: dict[tuple[int, str], float] = field(default_factory=dict)

    def add(self, rank: int, stream: str, name: str, cause: str, start_s: float, end_s: float) -> None:
        if end_s <= start_s:
            return
        if stream == "compute":
            key = (rank, cause)
            self.totals[key] = self.totals.get(key, 0.0) + (end_s - start_s)
        if self.record:
            self.segments.append(Segment(rank, stream, name, cause, start_s, end_s))

    def add_segment(self, rank: int, stream: str, name: str, cause: str, start_s: float, end_s: float) -> None:
        """A segment for the drawing only (recorded timelines): the totals take the same seconds
        from ``add_totals``, as they do when nothing is recorded, so that recording a step does not
        change its numbers (sums of clock differences round differently)."""
        if self.record and end_s > start_s:
            self.segments.append(Segment(rank, stream, name, cause, start_s, end_s))

    def add_totals(self, rank: int, by_cause: tuple[tuple[str, float], ...]) -> None:
        """Add seconds by cause to ``rank``'s compute-stream totals without segments."""
        totals = self.totals
        for cause, sec in by_cause:
            if sec > 0:
                key = (rank, cause)
                totals[key] = totals.get(key, 0.0) + sec

    def busy(self, rank: int) -> dict[str, float]:
        """Seconds of ``rank``'s compute stream by cause (idle time not yet blamed)."""
        return {cause: self.totals.get((rank, cause), 0.0) for cause in CAUSES}


@dataclass(frozen=True, slots=True)
class StepResult:
    """One simulated step: its time, the rank that finished last, and that rank's breakdown."""

    step_time_s: float
    critical_rank: int
    breakdown: dict[str, float]
    rank_end_s: tuple[float, ...]

    @staticmethod
    def fields_from(end_s: Sequence[float], busy: Sequence[Mapping[str, float]]) -> tuple:
        """(step, critical rank, breakdown, end times): the step ends when the last rank does
        (ties go to the lowest rank); its idle time not otherwise blamed is bubble (beyond
        ``IDLE_ROUNDING``)."""
        step = max(end_s)
        critical = max(range(len(end_s)), key=lambda r: (end_s[r], -r))
        breakdown = {cause: busy[critical].get(cause, 0.0) for cause in CAUSES}
        idle = step - sum(breakdown.values())
        if idle > IDLE_ROUNDING * step:
            breakdown["bubble"] += idle
        return step, critical, breakdown, tuple(end_s)


@dataclass(frozen=True, slots=True)
class SimResult(StepResult):
    """The event engine's step, with its timeline (segments only when recorded)."""

    timeline: Timeline
    last_action_s: tuple[float, ...] = ()   # per simulated rank: when its last action ended

    def busy(self, rank: int) -> dict[str, float]:
        """Seconds of ``rank``'s compute stream by cause."""
        return self.timeline.busy(rank)


@dataclass(frozen=True, slots=True)
class ClosedResult(StepResult):
    """The closed form's step, with every simulated rank's seconds by cause."""

    last_action_s: tuple[float, ...] = ()   # per simulated rank: when its last action ended
    rank_causes: tuple[dict[str, float], ...] = ()

    def busy(self, rank: int) -> dict[str, float]:
        """Seconds of ``rank``'s compute stream by cause."""
        return dict(self.rank_causes[rank])
