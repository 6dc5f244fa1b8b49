"""The regime of a scenario: which published evidence speaks for its prediction.

A prediction is backed by measured runs of the same kind: the same parallelism family (Megatron-
style 3D with ZeRO 0-2, or ZeRO-3 / FSDP) on the same GPU generation. Features that no measured
run of the regime shares (another ZeRO-3 implementation, a framework, GPU counts beyond the
measured range, a pipeline schedule, MoE, FP8, context parallelism, faults) widen the interval
(clustersim.uncertainty.interval).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.compute.arch import arch_for
from clustersim.compute.variation import speed_beyond_spread
from clustersim.plan.dp_rules import zero3_impl
from clustersim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Features:
    """What the interval looks at in a scenario."""

    regime: str        # "<family>/<generation>", e.g. "3d/hopper", "zero3/a100"
    framework: str
    zero3_impl: str    # "" unless ZeRO-3
    gpus: int
    moe: bool
    dtype: str
    cp: int
    generation: str
    schedule: str = ""  # the pipeline schedule when there is a pipeline (pp > 1), else ""
    faults: tuple[str, ...] = ()  # the kinds of fault that slow something (``fault_kinds``), else ()


# measurement sets of one GPU generation share a regime (the PCIe, NVL and Grace parts included)
_GENERATIONS = {"a100": "a100", "a100-pcie": "a100", "h100": "hopper", "h200": "hopper", "h100-pcie": "hopper",
                "h100-nvl": "hopper", "gh200": "hopper"}


def generation(gpu_name: str) -> str:
    """GPU generation of the compute model's measurement set: a100, hopper, or the profile's own family."""
    from clustersim.hardware.load import load_gpu

    arch = arch_for(load_gpu(gpu_name)).name
    return _GENERATIONS.get(arch, arch)


def features(scenario: Scenario) -> Features:
    par = scenario.parallel
    gen = _GENERATIONS.get(arch_for(scenario.cluster.gpu).name, arch_for(scenario.cluster.gpu).name)
    family = "zero3" if par.zero_stage == 3 and par.dp * par.cp > 1 else "3d"
    return Features(regime=f"{family}/{gen}", framework=scenario.framework.name,
                    zero3_impl=zero3_impl(scenario) if family == "zero3" else "",
                    gpus=scenario.cluster.num_gpus, moe=scenario.model.is_moe, dtype=scenario.training.dtype,
                    cp=par.cp, generation=gen, schedule=par.schedule if par.pp > 1 else "",
                    faults=fault_kinds(scenario))


def fault_kinds(scenario: Scenario) -> tuple[str, ...]:
    """The kinds of fault of ``scenario``'s ``faults:`` section (docs/perrank.md) that slow anything,
    in the section's order: ``slow_gpus`` and ``stragglers`` with a GPU beyond the healthy spread's
    slowest (``variation.speed_beyond_spread`` below 1: a GPU within the spread costs nothing, the
    engines run it at nominal speed), ``slow_links`` with a NIC below its rate. () without faults,
    for ``faults: {}`` and for faults that slow nothing: those predict as the healthy cluster."""
    faults, gpus = scenario.faults, scenario.cluster.num_gpus
    if faults is None:
        return ()
    slowed = {
        "slow_gpus": any(speed_beyond_spread(speed, gpus) < 1.0 for _, speed in faults.slow_gpus),
        "stragglers": bool(faults.straggler_ranks(gpus))
        and speed_beyond_spread(1.0 / faults.straggler_slowdown, gpus) < 1.0,
        "slow_links": any(speed < 1.0 for *_, speed in faults.slow_links),
    }
    return tuple(kind for kind, slows in slowed.items() if slows)


def cover_key(f: Features) -> str:
    """The kind of run a calibration covers (docs/uncertainty.md): dense or MoE; 3D (ZeRO 0-2) or
    ZeRO-3/FSDP; with context parallelism; in FP8/FP4; with faults. A profile fitted on "dense 3D"
    runs does not claim MoE, ZeRO-3, CP or a faulty GPU or link: each moves other costs than the ones
    its runs exercised."""
    family = "ZeRO-3/FSDP" if f.regime.startswith("zero3/") else "3D"
    key = f"{'MoE' if f.moe else 'dense'} {family}"
    if f.cp > 1:
        key += " + CP"
    if f.dtype in ("fp8", "fp4"):
        key += f" {f.dtype.upper()}"
    if f.faults:
        key += " + faults"
    return key
