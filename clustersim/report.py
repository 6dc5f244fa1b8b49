"""StepReport: what `clustersim run` prints (docs/output.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clustersim.energy import EnergyReport, energy_report, mixed_energy_report
from clustersim.engine.timeline import CAUSES
from clustersim.errors import InputError
from clustersim.frameworks import grad_reduce_dtype
from clustersim.memory import MemoryReport
from clustersim.memory.host import HostMemory, host_memory
from clustersim.scenario import Scenario
from clustersim.scenario.node_groups import group_of_node
from clustersim.uncertainty import Interval, step_interval
from clustersim.workload.model_summary import model_json


def peak_flops_per_gpu(sc: Scenario) -> float:
    """The dense peak FLOP/s of one GPU at the job's dtype, MFU's denominator (mixed GPUs: their mean)."""
    dtype = sc.training.dtype
    if sc.node_groups:
        return sum(g.nodes * g.cluster.gpu.peak(dtype) for g in sc.node_groups) / sc.cluster.num_nodes
    return sc.cluster.gpu.peak(dtype)


def step_at_peak_s(sc: Scenario) -> float:
    """The shortest step the GPUs' dense peak allows for the model's FLOPs (MFU 100%)."""
    from clustersim.compute.flops import model_flops_per_step
    return model_flops_per_step(sc.model, sc.parallel.global_batch) / (sc.cluster.num_gpus * peak_flops_per_gpu(sc))


@dataclass(frozen=True, slots=True)
class StepReport:
    scenario: Scenario
    engine: str                  # "event" | "analytical"
    step_time_s: float
    model_flops_per_step: float
    breakdown: dict[str, float]  # seconds on the critical rank's compute stream, by cause
    memory: MemoryReport         # the pipeline rank with the highest peak
    memory_by_stage: tuple[MemoryReport, ...]
    critical_rank: int
    analytical_step_time_s: float | None = None  # the closed-form twin, when both ran
    per_rank: dict[str, Any] | None = None       # per-rank mode (faults): classes, cost, the pacing rank

    @property
    def num_gpus(self) -> int:
        return self.scenario.cluster.num_gpus

    @property
    def host(self) -> HostMemory | None:
        """The node's host memory check (clustersim.memory.host.host_memory) of the stages' offloaded
        bytes, or None without offload."""
        sc = self.scenario
        par, groups = sc.parallel, sc.node_groups
        capacity = (lambda n: groups[group_of_node(groups, n)].cluster.host_memory_bytes) if groups else None
        return host_memory([m.host_bytes_per_gpu for m in self.memory_by_stage], sc.cluster,
                           par.tp * par.cp * par.dp, capacity)

    @property
    def host_memory(self) -> dict[str, Any] | None:
        """Whether a node's host memory holds what its GPUs offload (``parallel.offload``), or None
        without offload: what each node's GPUs offload together (their stages' bytes) against its
        own host memory (the cluster profile's ``host_memory_GiB``, on a mixed cluster its group's);
        the deciding node's numbers; verdict ``fits``, ``does-not-fit``, or ``unknown`` where the profile
        gives no host memory. A warning beside the GPU verdict, not part of it: `run` does not exit
        3 on it; the sweep ranks a layout whose host memory does not hold it as not fitting
        (docs/output.md, ``memory.host``). The rule: clustersim.memory.host.host_memory."""
        host = self.host
        if host is None:
            return None
        groups = self.scenario.node_groups   # the deciding node's hardware (a mixed cluster's group's)
        cluster = groups[group_of_node(groups, host.node)].cluster if groups else self.scenario.cluster
        out: dict[str, Any] = {"bytes_per_gpu": host.bytes_per_gpu, "gpus_per_node": host.gpus_per_node,
                               "bytes_per_node": host.bytes_per_node,
                               "capacity_bytes_per_node": host.capacity_bytes_per_node, "verdict": host.verdict}
        if self.scenario.parallel.offload_optimizer:   # what the host Adam streams through (plan.host_offload)
            from clustersim.plan.host_offload import host_dram_bw
            bw, given = host_dram_bw(cluster)
            out.update(adam_bw_bytes_per_s_per_node=bw, adam_bw_from_profile=given)
        return out

    @property
    def tokens_per_s(self) -> float:
        return self.scenario.parallel.global_batch * self.scenario.model.seq_len / self.step_time_s

    @property
    def tflops_per_gpu(self) -> float:
        return self.model_flops_per_step / self.step_time_s / self.num_gpus / 1e12

    @property
    def interval(self) -> Interval:
        """The 80% interval of the step time (clustersim.uncertainty), its low end no shorter than
        the step at the GPUs' peak."""
        return step_interval(self.scenario).within_peak(step_at_peak_s(self.scenario), self.step_time_s)

    @property
    def mfu(self) -> float:
        return self.tflops_per_gpu * 1e12 / peak_flops_per_gpu(self.scenario)

    @property
    def energy(self) -> EnergyReport:
        """Power and energy of this step on the whole cluster (clustersim.energy)."""
        sc = self.scenario
        tokens = sc.parallel.global_batch * sc.model.seq_len
        if sc.node_groups:  # mixed GPUs: each group at its own power
            return mixed_energy_report([(g.cluster, g.nodes) for g in sc.node_groups], self.step_time_s, tokens)
        return energy_report(sc.cluster, self.step_time_s, tokens)

    def to_json(self, tokens: float | None = None) -> dict[str, Any]:
        """The keys of docs/output.md, `run --json`; ``tokens`` adds the energy of a whole training run on that many tokens."""
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, (int, float))
                                   or not math.isfinite(tokens) or tokens <= 0):
            raise InputError("tokens", tokens, "a number of training tokens > 0 (2e12, not '2T': "
                             "clustersim.sweep.compare.parse_tokens reads text), or None")
        sc = self.scenario
        par = sc.parallel
        out: dict[str, Any] = {
            "name": sc.name,
            "engine": self.engine,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "model_flops_per_step": self.model_flops_per_step,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "interval": self.interval.to_json(self.step_time_s, self.mfu, self.tokens_per_s),
            "memory": {**self.memory.to_json(), **({"host": host} if (host := self.host_memory) else {})},
            "breakdown": {cause: self.breakdown.get(cause, 0.0) for cause in CAUSES},
            "gpus": self.num_gpus,
            "cluster": {"preset": sc.cluster.name, "nodes": sc.cluster.num_nodes, "gpu": sc.cluster.gpu.name,
                        "gpus_per_node": sc.cluster.gpus_per_node, "scale_up": sc.cluster.scale_up.name,
                        "scale_out": sc.cluster.scale_out.name, "scale_up_domain": sc.cluster.gpus_per_domain},
            "energy": self.energy.to_json(tokens),
            "model": model_json(sc.model),
            "parallel": {"tp": par.tp, "pp": par.pp, "dp": par.dp, "cp": par.cp, "ep": par.ep,
                         "sequence_parallel": par.sequence_parallel, "zero_stage": par.zero_stage,
                         "micro_batch": par.micro_batch, "global_batch": par.global_batch,
                         "num_micro_batches": par.num_micro_batches, "schedule": par.schedule,
                         "virtual_stages": par.virtual_stages, "recompute": par.recompute,
                         "recompute_every": par.recompute_every, "recompute_method": par.recompute_method,
                         "recompute_num_layers": par.recompute_num_layers},
            "dtype": sc.training.dtype,
            "framework": sc.framework.name,
            "attention": sc.training.attention,
            "compile": sc.training.compile,
            "grad_reduce_dtype": grad_reduce_dtype(par.zero_stage, par.fsdp_version, sc.framework,
                                                   par.grad_reduce_dtype, dtype=sc.training.dtype),
            "critical_stage": self.critical_rank,
            "memory_by_stage": [m.peak_bytes_per_gpu for m in self.memory_by_stage],
            "memory_parts_by_stage": [{**m.parts(), "allocated_peak_bytes": m.allocated_peak_bytes,
                                       "reserved_peak_bytes": m.reserved_peak_bytes, "verdict": m.verdict}
                                      for m in self.memory_by_stage],
        }
        if par.layers_per_stage and not sc.node_groups:   # explicit or a framework's split (docs/parallel.md)
            out["parallel"]["layers_per_stage"] = list(par.layers_per_stage)
        if sc.cluster.calibration is not None:   # what calibration changed (docs/calibration.md)
            from clustersim.uncertainty.calibration_shown import calibration_json
            out["calibration"] = calibration_json(sc)
        if self.analytical_step_time_s is not None:
            out["analytical_step_time_s"] = self.analytical_step_time_s
        if self.per_rank:
            out["faults"] = self.per_rank
        if sc.node_groups:
            from clustersim.perrank.hetero import report

            out["heterogeneous"] = report(sc)
        if sc.notes:   # fields without effect (clustersim.scenario.loader._scenario_notes)
            out["notes"] = list(sc.notes)
        return out

