"""NCCL's documented cost constants: protocol efficiencies, per-step latencies, bandwidth caps.

Source, unless a line says otherwise: NVIDIA/nccl ``src/graph/tuning.cc`` (v2.19-2.21, function
``ncclTopoTuneModel``; the tables are quoted in the same form by volcengine/veScale
``vescale/emulator/nccl/graph/tuning.py`` and by SimAI's MockNccl). NCCL uses these numbers to choose an algorithm and
protocol for every call; they are NVIDIA's own fit of its kernels on NVLink, PCIe and InfiniBand
and so the best public statement of what one step of each protocol costs. Latencies are in
microseconds there and in seconds here.
"""

from __future__ import annotations

from clustersim import units

PROTOCOLS = ("LL", "LL128", "Simple")
HW_NVLINK, HW_PCI, HW_NET, HW_XGMI = "nvlink", "pci", "net", "xgmi"

# baseLat[algo][proto] (us): fixed launch + synchronisation cost of one collective.
# tuning.cc: Tree {6.8, 14.0, 0}, Ring {6.6, 14.0, 8.4}; NVLS / NVLS-tree Simple 23 us
# (tuning.cc: NVLS latency = hwLat[NVLINK][NVLS][Simple] = 23 us, replacing baseLat).
BASE_LAT_S = {
    "tree": {"LL": 6.8 * units.US, "LL128": 14.0 * units.US, "Simple": 0.0},
    "ring": {"LL": 6.6 * units.US, "LL128": 14.0 * units.US, "Simple": 8.4 * units.US},
    "nvls": {"Simple": 23.0 * units.US},
    "nvls_tree": {"Simple": 23.0 * units.US},
}

# hwLat[hw][algo][proto] (us): cost of one algorithm step (one hop) on that hardware.
# tuning.cc NVLINK: Tree {.6, 1.25, 4}, Ring {.6, 1.9, 3.4}; PCI: Tree {1.0, 1.9, 6}, Ring
# {1.0, 2.5, 5.7}; NET: Tree {5.0, 8.5, 14}, Ring {2.7, 4.0, 14.0}, NVLS-tree Simple 19.
HW_LAT_S = {
    HW_NVLINK: {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
                "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}},
    HW_PCI: {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
             "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7}},
    HW_NET: {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
             "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
             "nvls_tree": {"Simple": 19.0}},
}
# AMD Instinct through RCCL (ROCm/rccl src/graph/tuning.cc): baseLat is {12, 12, 17} us for tree
# and ring (LL, LL128, Simple), and its tuning models list the xGMI hop (RCCL's NVLINK class)
# as Tree {0.8, 1.4, 2.5}, Ring {0.8, 2.2, 3.6} us.
HW_LAT_S[HW_XGMI] = {"tree": {"LL": 0.8, "LL128": 1.4, "Simple": 2.5}, "ring": {"LL": 0.8, "LL128": 2.2, "Simple": 3.6}}
HW_LAT_S = {hw: {a: {p: v * units.US for p, v in d.items()} for a, d in algos.items()}
            for hw, algos in HW_LAT_S.items()}
RCCL_BASE_LAT_S = {"tree": {"LL": 12.0 * units.US, "LL128": 12.0 * units.US, "Simple": 17.0 * units.US},
                   "ring": {"LL": 12.0 * units.US, "LL128": 12.0 * units.US, "Simple": 17.0 * units.US}}


def base_lat(vendor: str, algo: str, proto: str) -> float:
    """Fixed cost of one collective call: NCCL's baseLat, or RCCL's on AMD GPUs."""
    table = RCCL_BASE_LAT_S if vendor == "amd" and algo in RCCL_BASE_LAT_S else BASE_LAT_S
    return table[algo][proto]

# Per inter-node ring step NCCL adds the CPU proxy's network overhead, x3 for Simple
# (tuning.cc getNetOverhead: 1 us on x86 hosts; "if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3").
NET_OVERHEAD_S = 1.0 * units.US
# "Plateau effect of ring": multi-node Simple ring all-reduce latency x1.4 on sm80+
# (tuning.cc ncclTopoGetAlgoTime, "lat *= comm->minCompCap < 80 ? 1.9 : 1.4").
RING_PLATEAU_FACTOR = 1.4

# Protocol wire efficiency: the fraction of a link's bandwidth that carries payload.
# LL: every 8-byte store carries 4 bytes of data and a 4-byte flag -> 1/2 (NCCL docs; tuning.cc
#     ring LL "busBw * .5").
# LL128: 128-byte lines with 120 bytes of data -> 120/128; tuning.cc uses 0.92.
# Simple: bulk copies with a flag per chunk -> 1.
RING_PROTO_EFF = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}
# Tree: tuning.cc "busBw*.92" for all protocols, then LL "/3.8", LL128 "x 7/9 on one node,
# 120/128 across nodes".
TREE_EFF = 0.92
TREE_LL_FACTOR = 1.0 / 3.8
TREE_LL128_FACTOR_1NODE = 7.0 / 9.0
TREE_LL128_FACTOR_NNODES = 120.0 / 128.0
# NVLS and NVLS-tree: tuning.cc converts their bus bandwidth with ratio 5/6.
NVLS_EFF = 5.0 / 6.0

# NVLS chunking (enqueue.cc, NVLS branch): chunks of at most 128 KiB, shrunk to 64/32/16 KiB when
# nBytes < 64/8/2 x concurrentOps x chunk, concurrentOps = nChannels x nHeads; NVLS runs 16
# channels (NCCL_NVLS_NCHANNELS default 16) and one head per channel inside a node. Each chunk
# ends with a completion flag to the peers and its acknowledgement: one NVLink round trip
# (2 x the LL hop of 0.6 us) during which that channel moves no data.
NVLS_CHANNELS = 16
NVLS_MAX_CHUNK_BYTES = 128 * 1024
NVLS_CHUNK_STEPS = ((2, 16 * 1024), (8, 32 * 1024), (64, 64 * 1024))  # (multiple, chunk) smallest first
NVLS_CHUNK_SYNC_S = 2 * 0.6 * units.US


def nvls_chunk_bytes(size_bytes: float, heads: int = 1) -> int:
    """NCCL's NVLS chunk size for a message of ``size_bytes``."""
    concurrent = NVLS_CHANNELS * heads
    for multiple, chunk in NVLS_CHUNK_STEPS:
        if size_bytes < multiple * concurrent * 2 * chunk:
            return chunk
    return NVLS_MAX_CHUNK_BYTES


def nvls_chunk_efficiency(size_bytes: float, port_bw: float) -> float:
    """Bandwidth fraction left after per-chunk synchronisation, relative to 128 KiB chunks.

    A channel moves one chunk in chunk / (port_bw / channels) and then waits NVLS_CHUNK_SYNC_S.
    The large-message efficiency (128 KiB chunks) is already in the measured NVLS port rate,
    so the ramp is normalised to 1 there.
    """
    def eff(chunk: int) -> float:
        xfer = chunk / (port_bw / NVLS_CHANNELS)
        return xfer / (xfer + NVLS_CHUNK_SYNC_S)

    return eff(nvls_chunk_bytes(size_bytes)) / eff(NVLS_MAX_CHUNK_BYTES)


# llMaxBws[arch][scale] (GB/s, the most an LL collective reaches whatever the channel count):
# one node by GPU generation {Volta 39.0, Ampere 87.7, Hopper 87.7}; 2 nodes 39.0, 4+ nodes
# 20.4 (x86 Intel row).
LL_MAX_BW_1NODE = {"volta": 39.0 * units.GB, "ampere": 87.7 * units.GB, "hopper": 87.7 * units.GB}
LL_MAX_BW_2NODES = 39.0 * units.GB
LL_MAX_BW_4NODES = 20.4 * units.GB

# treeCorrectionFactor[proto][log2(bytes/64)] for 64 B..128 MiB (tuning.cc: "Trees are not
# perfectly sticking to the model for medium sizes. Applying a static correction factor").
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9),
}


def tree_correction(protocol: str, size_bytes: float) -> float:
    """NCCL's medium-size tree bandwidth correction (1.0 outside 64 B..256 MiB)."""
    n = int(size_bytes) >> 6
    if n <= 0:
        return TREE_CORRECTION[protocol][0]
    log_size = n.bit_length() - 1
    table = TREE_CORRECTION[protocol]
    return table[log_size] if log_size < len(table) else 1.0


def gpu_arch(gpu_name: str) -> str:
    """volta | ampere | hopper from a GPU profile name (v100*, a100*, anything newer: hopper's row,
    the newest in NCCL's llMaxBws table)."""
    name = gpu_name.lower()
    if name.startswith("v100"):
        return "volta"
    if name.startswith("a"):
        return "ampere"
    return "hopper"


def ll_max_bw(arch: str, num_nodes: int) -> float:
    if num_nodes <= 1:
        return LL_MAX_BW_1NODE.get(arch, LL_MAX_BW_1NODE["hopper"])
    return LL_MAX_BW_2NODES if num_nodes == 2 else LL_MAX_BW_4NODES
