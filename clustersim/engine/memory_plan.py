"""Per-GPU memory of each pipeline rank, with the activations in flight taken from the schedule."""

from __future__ import annotations

from clustersim.memory import MemoryReport, memory_report
from clustersim.parallel.pipeline import Action, stage_layers
from clustersim.scenario import Scenario


def layers_in_flight(actions: tuple[Action, ...], rank: int, pp: int, counts: tuple[int, ...]) -> int:
    """Peak number of (layer, micro-batch) activations held at once: a forward adds its chunk's
    layers, the matching backward frees them."""
    held = peak = 0
    for a in actions:
        layers = counts[a.chunk * pp + rank]
        held += layers if a.kind == "F" else -layers
        peak = max(peak, held)
    return peak


def rank_memory(scenario: Scenario, schedule: tuple[tuple[Action, ...], ...]) -> tuple[MemoryReport, ...]:
    """One MemoryReport per pipeline rank."""
    par = scenario.parallel
    counts = par.layers_per_stage or stage_layers(scenario.model.layers, par.pp, par.virtual_stages)
    out = []
    for r in range(par.pp):
        layers = sum(counts[c * par.pp + r] for c in range(par.virtual_stages))
        in_flight = layers_in_flight(schedule[r], r, par.pp, counts) / layers
        out.append(memory_report(scenario.model, par, scenario.cluster, scenario.training.dtype,
                                 layers, in_flight, r == 0, r == par.pp - 1, scenario.training.attention))
    return tuple(out)
