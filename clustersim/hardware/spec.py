"""Frozen specs of GPUs, fabrics and clusters. SI units inside (see clustersim.units)."""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
FABRIC_KINDS = ("nvswitch", "nvlink", "pcie", "infiniband", "roce", "ethernet")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model.

    ``peak_flops_per_s`` holds (dtype, dense tensor-core peak) pairs (no 2:4 sparsity); a dtype
    the GPU lacks (fp8 on A100) is absent. Kept as a tuple so that specs stay hashable. ``hbm_capacity_bytes`` is what the driver reports as total.
    """

    name: str
    peak_flops_per_s: tuple[tuple[str, float], ...]
    hbm_capacity_bytes: int
    hbm_bw_bytes_per_s: float
    vector_flops_per_s: float = 0.0  # non-tensor FP32 peak (softmax, norms); 0 = unknown
    l2_bytes: int = 0
    num_sms: int = 0
    tdp_w: float = 0.0
    price_per_gpu_hour_usd: float = 0.0
    # > 0: a fixed fraction of peak that GEMMs reach, fitted by `clustersim validate` for a
    # calibrated profile; 0: the shape-dependent GEMM efficiency model of clustersim.compute.
    gemm_efficiency: float = 0.0
    # Constants `clustersim calibrate` fits for one machine (defaults: the published models of
    # clustersim.compute). gemm_scale multiplies the shape model's GEMM efficiency and
    # attention_scale the flash-attention ceilings (both fitted to a profiler trace's kernels);
    # hbm_efficiency (> 0) replaces the 0.85 that memory-bound kernels reach of hbm_bw; every
    # compute kernel's time is divided by compute_scale (fitted to training logs' step times).
    gemm_scale: float = 1.0
    attention_scale: float = 1.0
    hbm_efficiency: float = 0.0
    compute_scale: float = 1.0
    description: str = ""

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; KeyError if the GPU has no such tensor path."""
        for name, value in self.peak_flops_per_s:
            if name == dtype:
                return value
        raise KeyError(dtype)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.peak_flops_per_s)


@dataclass(frozen=True, slots=True)
class FabricSpec:
    """One link technology.

    ``bw_bytes_per_s`` is the raw signalling rate per direction of one port (a NIC) or, for
    NVLink/NVSwitch, of one GPU's whole NVLink bundle. ``efficiency`` is the fraction of it
    that large transfers achieve (protocol, encoding and header overhead). ``latency_s`` is
    the end-to-end one-way latency of a small message through one switch (software included);
    ``switch_latency_s`` is added per further switch hop.
    """

    name: str
    kind: str
    bw_bytes_per_s: float
    latency_s: float
    efficiency: float = 1.0
    switch_latency_s: float = 0.0
    nvls: bool = False  # NVLink SHARP: in-switch reduction (NVSwitch gen3+)
    nvls_bw_bytes_per_s: float = 0.0  # achievable NVLS all-reduce algorithm bandwidth per GPU
    # fixed cost of one NVLS / NVLS-tree collective; 0 = NCCL's tuning-table value (23 us,
    # clustersim.collectives.nccl_tuning); a profile fitted to nccl-tests output sets it
    nvls_latency_s: float = 0.0
    description: str = ""

    @property
    def effective_bw_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


@dataclass(frozen=True, slots=True)
class CalibrationEvidence:
    """How well a calibrated cluster predicted real runs it was not fitted to.

    Written by `clustersim calibrate --log ...` into the cluster's ``calibration:`` mapping of the
    profile and read back here; the prediction interval (clustersim.uncertainty) uses these
    residuals in place of the generic ones when a scenario runs on this cluster.

    ``loo_rel_errors``: one per run, leave-one-out: the step time predicted by a calibration
    fitted without that run, relative to the measured one (predicted / measured - 1).
    ``source``: what was fitted (the log files); ``date``: the date of the newest measurement
    (ISO 8601, from the logs' time stamps) or "unknown".
    """

    runs: int
    loo_rel_errors: tuple[float, ...]
    source: str = ""
    date: str = "unknown"

    @property
    def step_time_rel_errors(self) -> tuple[float, ...]:
        """The residuals the prediction interval reads (clustersim.uncertainty.interval)."""
        return self.loo_rel_errors


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A cluster: identical nodes, each with GPUs on a scale-up fabric and NICs on a scale-out fabric.

    The scale-out network is rail-optimised: NIC ``i`` of every node attaches to leaf switch
    (rail) ``i`` of its group of ``nodes_per_leaf`` nodes; leaves connect to spines with
    ``oversubscription`` : 1 (1.0 = full bisection). ``pcie`` is the GPU<->NIC/host link.
    """

    name: str
    gpu: GpuSpec
    num_nodes: int
    gpus_per_node: int
    scale_up: FabricSpec
    scale_out: FabricSpec
    nics_per_node: int
    nodes_per_leaf: int = 32
    oversubscription: float = 1.0
    pcie: FabricSpec | None = None
    host_memory_bytes: int = 0
    description: str = ""
    calibration: CalibrationEvidence | None = None   # set for a cluster fitted to real runs

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def gpus_per_nic(self) -> int:
        return max(1, self.gpus_per_node // max(1, self.nics_per_node))
