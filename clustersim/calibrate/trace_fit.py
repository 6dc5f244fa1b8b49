"""Fit a machine's compute constants (and communication observations) to a profiler trace.

Each classified kernel (clustersim.calibrate.trace_kernels) is priced by the compute model's own
operation for its shape, on the uncalibrated GPU, and compared with its measured duration:

* GEMM (``aten::mm``/``addmm``/``bmm``/``baddbmm`` shapes): clustersim.compute.gemm.gemm_op; a
  GEMM the model calls compute-bound takes 1/gemm_scale of its time, so ``gemm_scale`` is the
  time-weighted geometric mean of predicted / measured over them;
* attention (``aten::_scaled_dot_product_*`` / ``_flash_attention_*`` shapes: batch, heads,
  sequence, head size; causal from the call's arguments): clustersim.compute.attention.
  attention_ops, forward and backward, giving ``attention_scale`` the same way;
* element-wise and other memory-bound kernels (bytes = the operator's input tensors read and an
  output of the first input's size written): ``hbm_efficiency`` = 0.85 x predicted / measured;
* NCCL kernels with their collective's arguments (size, group): observations for the fabric fit
  (clustersim.calibrate.fabric_fit). A kernel's time includes waiting for the slowest rank, so
  these err on the slow side; nccl-tests logs, when given, weigh as much.

Kernels without shapes (no ``record_shapes``, no linked operator) and kernels without work (a
GEMM or attention with a dimension of 0: an MoE expert given no tokens) are counted and reported,
not fitted. Weights are the measured durations: the kernels that fill the step decide.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from clustersim import units
from clustersim.calibrate.fabric_fit import Observation
from clustersim.calibrate.trace_kernels import DTYPE_BYTES, TORCH_DTYPES, Kernel, Trace, nccl_op
from clustersim.compute.roofline import HBM_EFFICIENCY
from clustersim.hardware.spec import ClusterSpec, GpuSpec

TRAINING_SIZE_BYTES = 16 * units.MiB


@dataclass
class KernelFit:
    gpu_constants: dict[str, float]
    comm_observations: list[Observation] = field(default_factory=list)
    counts: dict[str, dict[str, float]] = field(default_factory=dict)   # category -> {kernels, seconds, fitted}
    notes: list[str] = field(default_factory=list)


def trace_gpu_preset(trace: Trace) -> str | None:
    from clustersim.importers.common import gpu_preset_in
    return gpu_preset_in(trace.device_name) if trace.device_name else None


def _dtype(k: Kernel, default: str = "bf16") -> str:
    for t in k.types:
        if t in TORCH_DTYPES:
            return TORCH_DTYPES[t]
    return default


def gemm_shape(k: Kernel) -> tuple[int, int, int, int] | None:
    """(M, N, K, batch) of a GEMM from its operator's input dims."""
    dims = [d for d in k.dims if isinstance(d, list)]
    op = k.op.split("::")[-1]
    try:
        if op in ("mm",) and len(dims) >= 2:
            (m, kk), (_, n) = dims[0], dims[1]
            return m, n, kk, 1
        if op == "addmm" and len(dims) >= 3:
            (m, kk), (_, n) = dims[1], dims[2]
            return m, n, kk, 1
        if op == "bmm" and len(dims) >= 2:
            (b, m, kk), (_, _, n) = dims[0], dims[1]
            return m, n, kk, b
        if op == "baddbmm" and len(dims) >= 3:
            (b, m, kk), (_, _, n) = dims[1], dims[2]
            return m, n, kk, b
    except (ValueError, TypeError):
        return None
    return None


def attention_shape(k: Kernel) -> tuple[int, int, int, int, bool] | None:
    """(batch, heads, seq, head_dim, causal) from an attention operator's query dims."""
    dims = [d for d in k.dims if isinstance(d, list) and len(d) == 4]
    if not dims:
        return None
    q = dims[0]
    # aten::_flash_attention_forward/backward take (batch, seq, heads, head_dim); the SDPA ops (batch, heads, seq, dim)
    b, s, h, d = q if k.op.startswith("aten::_flash_attention") else (q[0], q[2], q[1], q[3])
    causal = any(str(c).strip().lower() == "true" for c in k.concrete)
    return int(b), int(h), int(s), int(d), causal


def element_bytes(k: Kernel) -> float | None:
    size = DTYPE_BYTES.get(next((t for t in k.types if t in DTYPE_BYTES), ""), 0)
    tensors = [d for d in k.dims if isinstance(d, list) and d]
    if not size or not tensors:
        return None
    n = [math.prod(int(x) for x in d) for d in tensors]
    return (sum(n) + n[0]) * size   # read every input, write one output of the first input's size


def _no_work(dims: tuple[int, ...], k: Kernel, empty: dict[str, int]) -> bool:
    """True (and counted in ``empty``) for a kernel whose shape has a dimension of 0: it does no
    work, so the model prices it at nothing and it says nothing about the machine's rate."""
    if all(dims):
        return False
    empty[k.category] = empty.get(k.category, 0) + 1
    return True


def _weighted_log_mean(pairs: list[tuple[float, float]]) -> float | None:
    """exp(sum w log r / sum w) over (ratio, weight) pairs."""
    total = sum(w for _, w in pairs)
    if total <= 0:
        return None
    return math.exp(sum(w * math.log(r) for r, w in pairs) / total)


def fit_traces(traces: list[Trace], cluster: ClusterSpec) -> KernelFit:
    from clustersim.compute.attention import attention_ops
    from clustersim.compute.gemm import gemm_efficiency, gemm_op
    from clustersim.compute.roofline import memory_time_s
    gpu: GpuSpec = replace(cluster.gpu, gemm_scale=1.0, attention_scale=1.0, hbm_efficiency=0.0, compute_scale=1.0)
    gemm, attn, mem = [], [], []
    empty: dict[str, int] = {}
    fit = KernelFit({})
    for trace in traces:
        for cat, ks in sorted(trace.by_category().items()):
            c = fit.counts.setdefault(cat, {"kernels": 0, "seconds": 0.0, "fitted": 0})
            c["kernels"] += len(ks)
            c["seconds"] += sum(k.dur_s for k in ks)
        for k in trace.kernels:
            if k.dur_s <= 0:
                continue
            if k.category == "gemm":
                shape = gemm_shape(k)
                if shape is None or _no_work(shape, k, empty):
                    continue
                m, n, kk, b = shape
                dtype = _dtype(k)
                if dtype not in gpu.dtypes:
                    dtype = gpu.dtypes[0]
                op = gemm_op("trace", m, n, kk, gpu, dtype, b)
                compute = op.flops / (gpu.peak(dtype) * gemm_efficiency(m, n, kk, gpu, dtype, b))
                if compute >= memory_time_s(op.bytes_moved, gpu):     # compute-bound: the scale applies
                    gemm.append((compute / k.dur_s, k.dur_s))
                    fit.counts["gemm"]["fitted"] += 1
            elif k.category in ("attention_fwd", "attention_bwd"):
                shape = attention_shape(k)
                if shape is None or _no_work(shape[:4], k, empty):
                    continue
                b, h, s, d, causal = shape
                dtype = _dtype(k)
                if dtype not in gpu.dtypes:
                    dtype = gpu.dtypes[0]
                fwd, bwd = attention_ops(b, s, s, h, h, d, gpu, dtype, 2, causal)
                pred = fwd.time_s if k.category == "attention_fwd" else bwd.time_s
                attn.append((pred / k.dur_s, k.dur_s))
                fit.counts[k.category]["fitted"] += 1
            elif k.category == "elementwise":
                nbytes = element_bytes(k)
                if nbytes is None or nbytes < 1 * units.MiB:   # launch-bound below a MiB
                    continue
                mem.append((memory_time_s(nbytes, gpu) / k.dur_s, k.dur_s))
                fit.counts["elementwise"]["fitted"] += 1
            elif k.category == "nccl":
                o = _comm_observation(k, cluster)
                if o is not None:
                    fit.comm_observations.append(o)
                    fit.counts["nccl"]["fitted"] += 1
    for key, pairs, lo, hi in (("gemm_scale", gemm, 0.05, 5.0), ("attention_scale", attn, 0.05, 5.0)):
        value = _weighted_log_mean(pairs)
        if value is not None:
            fit.gpu_constants[key] = min(max(value, lo), hi)
    value = _weighted_log_mean(mem)
    if value is not None:
        fit.gpu_constants["hbm_efficiency"] = min(max(HBM_EFFICIENCY * value, 0.01), 1.0)
    for cat, n in sorted(empty.items()):
        fit.notes.append(f"trace: {n} {cat} kernels with a dimension of 0 (no work: an MoE expert given no tokens): "
                         "counted, not fitted")
    for cat, c in sorted(fit.counts.items()):
        if c["kernels"] and not c["fitted"] and cat != "other":
            fit.notes.append(f"trace: {int(c['kernels'])} {cat} kernels without shapes or sizes (record_shapes=True "
                             "links them to their operators): counted, not fitted")
    if traces and all(t.device == "cpu" for t in traces):
        fit.notes.append("trace recorded on a CPU: its operators were fitted against "
                         f"{cluster.gpu.name}'s model; the constants describe that CPU, not a GPU")
    return fit


def _comm_observation(k: Kernel, cluster: ClusterSpec) -> Observation | None:
    comm = dict(k.comm)
    op = nccl_op(k)
    n = comm.get("Group size")
    if op is None or not isinstance(n, int) or n < 2:
        return None
    size = DTYPE_BYTES.get(str(comm.get("dtype", "")), 0)
    nin, nout = comm.get("In msg nelems"), comm.get("Out msg nelems")
    if not size or not isinstance(nin, int) or not isinstance(nout, int):
        return None
    # nccl-tests size convention: all_reduce the buffer, all_gather the gathered output,
    # reduce_scatter the full input, all_to_all the whole send buffer
    total = (nout if op == "all_gather" else max(nin, nout)) * size
    if total < units.MiB:
        return None
    ranks = _ranks(comm.get("Process Group Ranks"))
    gpn = cluster.gpus_per_node
    if ranks and len(ranks) == n:
        per_node: dict[int, int] = {}
        for r in ranks:
            per_node[r // gpn] = per_node.get(r // gpn, 0) + 1
        if len(set(per_node.values())) != 1:
            return None
        nodes, rpn = len(per_node), next(iter(per_node.values()))
    else:
        rpn = min(n, gpn)
        nodes = max(1, n // rpn)
    weight = 1.0 if total >= TRAINING_SIZE_BYTES else 0.05
    return Observation(op, float(total), k.dur_s, rpn, nodes, f"trace {k.name[:40]}", weight)


def _ranks(value: Any) -> list[int]:
    if isinstance(value, list):
        return [int(v) for v in value if isinstance(v, int)]
    if isinstance(value, str) and "..." not in value:
        return [int(v) for v in re.findall(r"-?\d+", value)]
    return []
