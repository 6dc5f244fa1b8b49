"""The trace's threads: none holds two overlapping events, each holds events, each is named as
docs/output.md's `run --trace FILE` section names them (clustersim.trace)."""

from __future__ import annotations

import re
import typing
from decimal import Decimal
from itertools import pairwise
from pathlib import Path

import pytest

from clustersim.api import simulate_with_timeline
from clustersim.engine.timeline import STREAMS
from clustersim.scenario.sections import ParallelSection
from clustersim.trace import trace_events
from tests.engine.test_step import make

SCHEDULES = typing.get_args(ParallelSection.model_fields["schedule"].annotation)   # every one the scenario takes
DOCS = Path(__file__).resolve().parents[2] / "docs" / "output.md"


def documented_threads() -> tuple[set[str], set[str]]:
    """(the streams the docs list, the streams whose extra threads they name as `<stream> 2`, ...)."""
    text = DOCS.read_text()
    section = text[text.index("### `run --trace FILE`"):]
    section = section[:section.index("\n## ")]
    listed = re.search(r"one thread per stream[^(]*\(([^)]*)\)", " ".join(section.split()))
    assert listed, "docs/output.md: the trace section lists no threads"
    names = {part.split(":")[0].strip() for part in listed.group(1).split(";")}
    return names, set(re.findall(r"`(\w+) 2`", section))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_no_thread_holds_overlapping_events_and_every_thread_is_documented(schedule: str) -> None:
    """DualPipe(-V) sent in both directions at once on one "pp" thread (two events with the same
    start and duration, drawn as parent and child), its pairs' TP collectives sat on a thread named
    "ep" on a dense model, and every trace declared the "rs" and "ep" threads without events."""
    extra = {"virtual_stages": 2} if schedule == "interleaved-1f1b" else {}
    sc = make(model="megatron-1.7b", nodes=1, tp=2, pp=4, dp=1, global_batch=16, schedule=schedule, **extra)
    _, result = simulate_with_timeline(sc)
    events = trace_events(result.timeline, sc)["traceEvents"]
    names, lanes = documented_threads()
    assert names == set(STREAMS)                # the docs list every stream of the engine
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans: dict[tuple[int, int], list[tuple[Decimal, Decimal]]] = {}
    for e in events:
        if e["ph"] == "X":
            start = Decimal(repr(e["ts"]))
            spans.setdefault((e["pid"], e["tid"]), []).append((start, start + Decimal(repr(e["dur"]))))
    assert set(spans) == set(threads)           # every event on a named thread, every named thread used
    for key, name in threads.items():
        base, _, n = name.partition(" ")
        assert name in names or (base in lanes and n.isdigit() and int(n) >= 2), name
        ordered = sorted(spans[key])
        for (_, end), (start, _) in pairwise(ordered):
            assert start >= end, (name, key, start, end)
