"""Frozen specs of GPUs, fabrics and clusters. SI units inside (see clustersim.units)."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.hashcache import HashMemo, cache_hash

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
# Block-scaled ("microscaling") tensor-core formats (OCP MX spec v1.0 2023; NVIDIA NVFP4): a GPU
# lists the ones its tensor cores run natively (Blackwell: all three; MI355X: mxfp8, mxfp4).
MICROSCALING = ("mxfp8", "mxfp4", "nvfp4")
VENDORS = ("nvidia", "amd")
# xgmi: AMD Infinity Fabric full mesh, one direct link per peer GPU and no switch
FABRIC_KINDS = ("nvswitch", "nvlink", "xgmi", "pcie", "infiniband", "roce", "ethernet")
SCALE_OUT_TOPOLOGIES = ("fat-tree", "rail-only")


@cache_hash
@dataclass(frozen=True, slots=True)
class GpuSpec(HashMemo):
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
    microscaling: tuple[str, ...] = ()  # block-scaled formats the tensor cores run natively
    vendor: str = "nvidia"
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
    nvls_bw_bytes_per_s: float = 0.0  # achievable NVLS port rate per GPU (0: effective x 5/6)
    nvls_max_algbw_bytes_per_s: float = 0.0  # cap on NVLS all-reduce algbw (0: none)
    # xgmi full mesh: direct links per GPU; bw_bytes_per_s is the sum over them, one peer per link
    links_per_gpu: int = 0
    switch_chips: int = 0   # NVLink switch chips of the domain, each GPU with one link bundle to every chip
    switch_trays: int = 0   # trays those chips sit in (NVL72: 18 chips in 9 trays)
    # fixed cost of one NVLS / NVLS-tree collective; 0 = NCCL's tuning-table value (23 us,
    # clustersim.collectives.nccl_tuning); a profile fitted to nccl-tests output sets it
    nvls_latency_s: float = 0.0
    description: str = ""

    @property
    def effective_bw_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


# the range `clustersim calibrate` fits compute_scale in (its step fit's grid, calibrate.runs.SCALE_GRID)
COMPUTE_SCALE_RANGE = (0.4, 2.5)


def at_range_edge(compute_scale: float) -> bool:
    """A fitted compute_scale within 1% of an end of COMPUTE_SCALE_RANGE: the fit stopped there,
    the runs are far from the model."""
    lo, hi = COMPUTE_SCALE_RANGE
    return not lo * 1.01 < compute_scale < hi / 1.01


@dataclass(frozen=True, slots=True)
class CalibratedFactor:
    """One constant `clustersim calibrate` fitted: its value, the base preset's, and the runs or
    files it was fitted to."""

    name: str                  # e.g. "compute_scale", "scale_out.bw"
    value: float
    before: float
    fitted_to: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CalibratedRun:
    """One run a calibration was fitted to: measured, predicted before and after (seconds)."""

    name: str
    measured_s: float
    before_s: float
    after_s: float


@dataclass(frozen=True, slots=True)
class CalibrationEvidence:
    """What a calibrated cluster was fitted to and how well it predicts runs it did not see.

    Written by `clustersim calibrate` into the cluster's ``calibration:`` mapping of the profile
    and read back here; the prediction interval (clustersim.uncertainty.calibrated) uses it
    when a scenario runs on this cluster (docs/uncertainty.md).

    ``loo_rel_errors``: leave-one-out, one per run: the step time predicted by a calibration
    fitted without that run, relative to the measured one (predicted / measured - 1). There are
    none from one run (a fit without it would be no fit at all): a profile that stores one from a
    single run (written before 2026-11) is read as having none. ``cover``: the regimes of the
    runs (clustersim.uncertainty.regimes.cover_key, e.g. "dense 3D"); ``min_gpus``..``max_gpus``
    and ``frameworks`` their range; ``schedules`` the pipeline schedules of the runs with a pipeline
    (pp > 1; none where every run had pp 1, or in a profile written before the key existed); ``factors`` and ``per_run``: what calibration changed.
    ``source``: what was fitted; ``date``: the newest measurement's date (ISO 8601) or "unknown".
    """

    runs: int
    loo_rel_errors: tuple[float, ...]
    source: str = ""
    date: str = "unknown"
    cover: tuple[str, ...] = ()
    min_gpus: int = 0
    max_gpus: int = 0
    frameworks: tuple[str, ...] = ()
    factors: tuple[CalibratedFactor, ...] = ()
    schedules: tuple[str, ...] = ()
    per_run: tuple[CalibratedRun, ...] = ()

    @property
    def step_time_rel_errors(self) -> tuple[float, ...]:
        """The leave-one-out residuals the prediction interval reads (none from a single run)."""
        return self.loo_rel_errors if self.runs >= 2 else ()


@cache_hash
@dataclass(frozen=True, slots=True)
class ClusterSpec(HashMemo):
    """A cluster: identical nodes, each with GPUs on a scale-up fabric and NICs on a scale-out fabric.

    The scale-out network is rail-optimised: NIC ``i`` of every node attaches to leaf switch
    (rail) ``i`` of its group of ``nodes_per_leaf`` nodes; leaves connect to spines with
    ``oversubscription`` : 1 (1.0 = full bisection). ``pcie`` is the GPU<->NIC link, and the GPU<->host
    memory link unless ``host_link`` names another (Grace Hopper / Grace Blackwell: NVLink-C2C, while
    the NICs stay on PCIe); ``host_memory_link`` is the one the offload and checkpoint copies use.

    ``scale_up_domain`` is the number of GPUs that share one scale-up (NVLink / xGMI) fabric:
    0 means one node (an 8-GPU server); an NVL72 rack has 4-GPU nodes (compute trays) and a
    72-GPU domain. ``nodes_per_pod`` > 0 adds a third (core) switch tier above pods of that many
    nodes, with ``pod_oversubscription`` : 1 at the spine uplinks. ``topology`` "rail-only" has
    no spines at all: NIC ``i`` of every node hangs off rail ``i`` alone (Wang et al. 2023,
    arXiv 2307.12169), so traffic between different rails goes over the scale-up fabric first.
    ``node_power_w`` is the node's maximum power (datasheet), ``pue`` the data centre's power
    usage effectiveness (0: the default of clustersim.energy).
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
    host_link: FabricSpec | None = None   # GPU <-> host memory where it is not pcie (NVLink-C2C); None: pcie
    host_memory_bytes: int = 0
    # host memory bandwidth of a node (its CPUs' DRAM channels, peak), what the host Adam of optimizer
    # offload streams through (clustersim.plan.host_offload); 0: the profile gives none
    host_memory_bw_bytes_per_s: float = 0.0
    scale_up_domain: int = 0
    topology: str = "fat-tree"
    nodes_per_pod: int = 0
    pod_oversubscription: float = 1.0
    node_power_w: float = 0.0
    pue: float = 0.0
    description: str = ""
    calibration: CalibrationEvidence | None = None   # set for a cluster fitted to real runs

    @property
    def host_memory_link(self) -> FabricSpec | None:
        """The link between a GPU and host memory: ``host_link`` where the profile names one, else
        ``pcie`` (None: the profile declares neither, so nothing can be offloaded)."""
        return self.host_link if self.host_link is not None else self.pcie

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def gpus_per_domain(self) -> int:
        """GPUs of one scale-up (NVLink / xGMI) domain: the node unless ``scale_up_domain`` says more;
        a job smaller than one domain runs on a partition of it (an NVL72 rack split among jobs)."""
        if not self.scale_up_domain:
            return self.gpus_per_node
        return min(self.scale_up_domain, self.num_gpus)

    @property
    def nodes_per_domain(self) -> int:
        return max(1, self.gpus_per_domain // self.gpus_per_node)

    @property
    def num_domains(self) -> int:
        return max(1, self.num_gpus // self.gpus_per_domain)

    @property
    def gpus_per_nic(self) -> int:
        return max(1, self.gpus_per_node // max(1, self.nics_per_node))
