"""Constructed nccl-tests logs in the exact output formats, for the import and fit tests.

The numbers are not from the simulator: each curve is busbw(S) = peak x S / (S + half) with a
latency floor, anchored on published figures (NVIDIA's sjeaugey in NVIDIA/nccl-tests#212: H100
NVLS all-reduce peaks at ~480 GB/s busbw, non-all-reduce collectives at ~370 GB/s; the issue
this calibration fixes: 8x H200 all-reduce 72 GB/s at 1 MiB rising to 481 GB/s at 16 GiB).
Formats follow nccl-tests src/util.cu (current) and the pre-2.11 layout (no Group, no root
column, an ``error`` column), with MPI rank tags where asked.
"""

from __future__ import annotations

import math

BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
       "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
       "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}
REDOP = {"all_reduce": ("sum", -1), "all_gather": ("none", -1), "reduce_scatter": ("sum", -1),
         "alltoall": ("none", -1), "broadcast": ("none", 0), "reduce": ("sum", 0), "sendrecv": ("none", -1)}
DIVIDED = ("all_gather", "reduce_scatter", "alltoall")

# the issue's 8x H200 all_reduce: busbw (GB/s) per size from 1 MiB to 16 GiB, times below 1 MiB
H200_AR_BUSBW = {2**20: 72, 2**21: 105, 2**22: 160, 2**23: 215, 2**24: 270, 2**25: 320, 2**26: 370, 2**27: 415,
                 2**28: 440, 2**29: 458, 2**30: 468, 2**31: 474, 2**32: 478, 2**33: 480, 2**34: 481}
H200_AR_SMALL_US = {8: 12.61, 16: 12.55, 32: 12.70, 64: 12.93, 128: 13.10, 256: 13.32, 512: 13.41, 1024: 13.63,
                    2048: 13.86, 4096: 14.02, 8192: 14.38, 16384: 14.91, 32768: 15.20, 65536: 15.88, 131072: 17.05,
                    262144: 18.71, 524288: 21.40}


def _fmt(v: float, w: int) -> str:
    for d in (2, 1, 0):
        s = f"{v:{w}.{d}f}"
        if len(s) <= w:
            return s
    return f"{v:{w}.1e}"


def curve_time_us(op: str, n: int, size: int, peak_busbw: float, half_bytes: float, floor_us: float) -> float:
    """busbw(S) = peak x S / (S + half), never faster than floor_us."""
    bus = peak_busbw * size / (size + half_bytes)
    return max(floor_us, size / (bus * 1e9 / BUS[op](n)) * 1e6)


def h200_all_reduce_time_us(size: int) -> float:
    if size in H200_AR_BUSBW:
        return size / (H200_AR_BUSBW[size] * 1e9 / BUS["all_reduce"](8)) * 1e6
    return H200_AR_SMALL_US[size]


def nccl_log(op: str, hosts: list[str], device: str, time_us, sizes: list[int], *, style: str = "new",
             named: bool = True, wrong: str = "0", dtype: str = "float", nccl: str = "2.21.5+cuda12.4") -> str:
    """One nccl-tests run. style: "new" (current nccl-tests), "old" (pre-2.11: no Group, no root,
    error column), "mpi" (new, every line tagged with [0] by the MPI launcher)."""
    n = len(hosts)
    word = {"float": 4, "half": 2, "bfloat16": 2, "int8": 1, "double": 8}[dtype]
    lines = []
    if named:
        lines.append(f"# Collective test starting: {op}_perf")
    lines += [f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 "
              "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    local: dict[str, int] = {}
    for r, h in enumerate(hosts):
        d = local.setdefault(h, 0)
        local[h] += 1
        if style == "old":
            lines.append(f"#   Rank {r:2d} Pid {40100 + r:6d} on {h:>10} device {d:2d} [0x{16 + 8 * d:02x}] {device}")
        else:
            lines.append(f"#  Rank {r:2d} Group  0 Pid {40100 + r:6d} on {h:>10} device {d:2d} "
                         f"[0x{16 + 8 * d:02x}] {device}")
    lines += [f"NCCL version {nccl}", "#"]
    redop, root = REDOP[op]
    if style == "old":
        lines += ["#                                                     out-of-place                       in-place",
                  "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
                  "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    else:
        lines += ["#                                                              out-of-place                       in-place          ",
                  "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
                  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    total = []
    for k, s in enumerate(sizes):
        t = time_us(s)
        t_in = t * (1 + 0.006 * math.sin(k * 1.7))
        count = s // word // (n if op in DIVIDED else 1)
        if style == "old":
            row = f"{s:12d}  {count:12d}  {dtype:>6}  {redop:>6}"
        else:
            row = f"{s:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
        for tt in (t, t_in):
            alg = s / tt / 1e3
            bus = alg * BUS[op](n)
            err = "0e+00" if style == "old" else wrong
            row += f"  {_fmt(tt, 7)}  {_fmt(alg, 6)}  {_fmt(bus, 6)}  {err:>6}"
            total.append(bus)
        lines.append(row)
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(total) / len(total):.4f} ", "#"]
    if style == "mpi":
        lines = ["[0] " + line for line in lines]
    return "\n".join(lines) + "\n"


def h200_issue_log(named: bool = False) -> str:
    """The issue's log: 8x H200 all_reduce, 8 B .. 16 GiB, in-place and out-of-place."""
    return nccl_log("all_reduce", ["gpu-h200-03"] * 8, "NVIDIA H200", h200_all_reduce_time_us,
                    [2**k for k in range(3, 35)], named=named)
