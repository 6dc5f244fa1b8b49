"""List scheduling of per-rank action lists: the one recurrence of a pipeline with fixed durations.

Every pipeline rank runs its actions in its own order. An action starts once its rank is free
and every input it awaits has arrived, runs for its duration, and then hands on its outputs,
each arriving a transfer delay later:

    start = max(rank free, inputs arrived[, release])      end = max(start + duration[, floor])

This is list scheduling over a fixed order per machine (Graham 1969; the recurrence of a
pipeline schedule's dry run, Narayanan et al. 2021, arXiv 2104.04473, §2.2). It is max-plus:
every time is a maximum of sums of durations and delays, so it is increasing in each of them.
The result does not depend on the order in which ranks are visited: a rank runs as far as its
inputs allow, and the loop visits the ranks until none can move.

Inputs and outputs are *events*, small integers: an action lists the events it awaits and the
events it produces; each event is produced once and may be awaited by any number of actions
(on any rank, its own included). What an action is (one schedule action, the two halves of an
overlapped pair, a forward gated by its parameter gathers) is the caller's: ``release`` is an
earliest start and ``floor`` an earliest end, per action.

Who runs it: ``parallel.pipeline.dry_run`` (unit times, no transfers: schedule validation and
bubbles) and the sweep's third-level bound (``sweep.replay``: compiled unit times, the fastest
pipeline transfer). The closed form (``engine.recurrence``) runs the same order and the same
start rule, but its durations are not fixed: see docs/engine.md, "The closed form's recurrence".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

Events = tuple[int, ...]


class Timeline(NamedTuple):
    """What a list schedule did: per rank, each action's start and end (as far as it ran), the
    rank's clock (its last end; 0 where it ran nothing) and how many of its actions ran; each
    event's arrival time (None: never produced); and whether every rank ran every action
    (False: the schedule deadlocks where ``ran`` says)."""

    starts: tuple[list[float], ...]
    ends: tuple[list[float], ...]
    clock: tuple[float, ...]
    ran: tuple[int, ...]
    arrivals: list[float | None]
    complete: bool


def list_schedule(needs: Sequence[Sequence[Events]], sends: Sequence[Sequence[Events]],
                  durations: Sequence[Sequence[float]], num_events: int,
                  delay: float | Sequence[Sequence[float]] = 0.0,
                  release: Sequence[Sequence[float]] | None = None,
                  floor: Sequence[Sequence[float]] | None = None,
                  blocks_from: Sequence[int] | None = None) -> Timeline:
    """Run the list schedule (module docstring). Per rank ``r`` and action ``i``: ``needs[r][i]``
    the events it awaits, ``sends[r][i]`` the events it produces (arriving ``delay`` after its
    end: one number for every transfer, or ``delay[r][i]`` per action), ``durations[r][i]`` its
    duration; optionally ``release[r][i]`` an earliest start and
    ``floor[r][i]`` an earliest end. Events are integers below ``num_events``. ``blocks_from[r]``
    (None: no rank's): from that action on, an action that sends holds its rank until its outputs
    have arrived (Megatron's non-interleaved sends, its interleaved schedule's cool-down:
    clustersim.frameworks.blocking_from); its recorded end is before that wait.

    Returns the ``Timeline``; where a rank cannot move (an input never arrives) it stops there,
    and ``ran`` says where (the caller names the deadlock)."""
    ranks = len(durations)
    arrivals: list[float | None] = [None] * num_events
    pos = [0] * ranks
    clock = [0.0] * ranks
    starts: tuple[list[float], ...] = tuple([] for _ in range(ranks))
    ends: tuple[list[float], ...] = tuple([] for _ in range(ranks))
    uniform = isinstance(delay, (int, float))
    progressed = True
    while progressed:
        progressed = False
        for r in range(ranks):
            i = pos[r]
            du = durations[r]
            n = len(du)
            if i == n:
                continue
            nd, sd, st, en = needs[r], sends[r], starts[r], ends[r]
            rel = release[r] if release is not None else None
            fl = floor[r] if floor is not None else None
            dl = None if uniform else delay[r]  # type: ignore[index]
            held = n if blocks_from is None else blocks_from[r]
            t = clock[r]
            while i < n:
                t0 = t
                blocked = False
                for e in nd[i]:
                    at = arrivals[e]
                    if at is None:
                        blocked = True
                        break
                    if at > t0:
                        t0 = at
                if blocked:
                    break
                if rel is not None and rel[i] > t0:
                    t0 = rel[i]
                t = t0 + du[i]
                if fl is not None and fl[i] > t:
                    t = fl[i]
                st.append(t0)
                en.append(t)
                out = sd[i]
                if out:
                    at = t + (delay if dl is None else dl[i])  # type: ignore[operator]
                    for e in out:
                        arrivals[e] = at
                    if i >= held and at > t:
                        t = at
                i += 1
            if i != pos[r]:
                pos[r], clock[r] = i, t
                progressed = True
    complete = all(pos[r] == len(durations[r]) for r in range(ranks))
    return Timeline(starts, ends, tuple(clock), tuple(pos), arrivals, complete)
