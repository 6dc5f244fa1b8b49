"""Read a PyTorch profiler (Kineto) Chrome trace and classify its kernels.

Format (torch.profiler ``export_chrome_trace``; Kineto's ChromeTraceLogger): a JSON object with
``traceEvents`` (and ``deviceProperties``: one entry per GPU with its ``name``). Complete events
``"ph": "X"`` carry ``ts`` and ``dur`` in microseconds. GPU kernels have ``"cat": "kernel"`` and
``args`` with ``External id`` (the CPU op that launched them), ``stream`` and ``device``; NCCL
kernels launched by torch.distributed also carry the ``record_param_comms`` arguments
(``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``dtype``, ``Group size``, ``Process
Group Ranks``). CPU operators have ``"cat": "cpu_op"`` and, with ``record_shapes=True``, ``Input
Dims`` / ``Input type`` / ``Concrete Inputs``: a GEMM kernel's M, N, K come from the ``aten::mm``
(``addmm``, ``bmm``, ...) that launched it.

A trace recorded on a CPU has no kernel events: the operators themselves run the math (MKL
GEMMs, ATen element-wise loops), so the CPU table classifies operators by name and uses their
self time (duration less their child operators).

Classification is a table (``GPU_KERNEL_CLASSES``, ``CPU_OP_CLASSES``), first match wins:
gemm, attention_fwd, attention_bwd, elementwise (memory-bound: norms, activations, casts,
optimizer updates, reductions), nccl, other. Kernel names come from cuBLAS (``sm90_xmma_gemm_*``,
``ampere_bf16_s16816gemm_*``, ``nvjet_*`` since CUDA 12.6), CUTLASS (``cutlass_80_tensorop_*``,
``cutlass3x_sm90_*``), FlashAttention (``flash_fwd_kernel``, ``flash_bwd_dq_dk_dv_loop_*``),
cuDNN fused attention (``cudnn_generated_fort_native_sdpa_*``), PyTorch (``at::native::
vectorized_elementwise_kernel``), Triton/Inductor (``triton_poi_*``, ``triton_red_*``,
``triton_tem_fused_mm_*``) and NCCL (``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``, before 2.19
``ncclKernel_AllReduce_RING_LL_Sum_float``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.inputs import read_json_file

MAX_TRACE_BYTES = 1024 * 2**20

# (pattern on the kernel name, class); attention before GEMM: FlashAttention's template names
# mention cutlass types
GPU_KERNEL_CLASSES: tuple[tuple[str, str], ...] = (
    (r"^ncclDevKernel|^ncclKernel|^nccl", "nccl"),
    (r"flash_bwd|fmha.*bwd|fmha_dgrad|_attn_bwd|attention_bwd|sdpa.*(bprop|bwd|dgrad)|efficient_attention_backward",
     "attention_bwd"),
    (r"flash_fwd|fmha.*fwd|fmha_fprop|_attn_fwd|attention_fwd|sdpa.*(fprop|fwd)|fmha_cutlass|efficient_attention_forward"
     r"|cudnn_generated_fort_native_sdpa", "attention_fwd"),
    (r"triton_tem_fused_(mm|addmm|bmm)|gemm|gemv|nvjet|xmma|s16816|h16816|i16832|wgmma|cutlass|cublas|tensorop"
     r"|matmul|splitKreduce", "gemm"),
    (r"triton_(poi|red|per)_|elementwise|vectorized|reduce_kernel|layer_norm|rms_?norm|layernorm|softmax|dropout"
     r"|fused_adam|multi_tensor|adam|cast|transpose|copy|fill|gelu|swiglu|silu|rotary|rope|cross_entropy|index"
     r"|scatter|gather|embedding|cat_|unrolled_elementwise|at::native", "elementwise"),
)
# CPU operators that do the work themselves (self time), by exact name
CPU_OP_CLASSES: dict[str, str] = {
    "aten::mm": "gemm", "aten::addmm": "gemm", "aten::bmm": "gemm", "aten::baddbmm": "gemm",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention_fwd",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "attention_bwd",
    **{f"aten::{n}": "elementwise" for n in (
        "add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "gelu", "gelu_backward", "silu", "silu_backward",
        "native_layer_norm", "native_layer_norm_backward", "_softmax", "_softmax_backward_data", "copy_", "fill_",
        "addcmul_", "addcdiv_", "lerp_", "sqrt", "pow", "sum", "mean", "neg", "exp", "rsqrt", "native_dropout",
        "_fused_rms_norm", "_fused_rms_norm_backward", "nll_loss_forward", "nll_loss_backward", "_log_softmax",
        "_log_softmax_backward_data", "embedding_dense_backward", "index_select", "clamp_", "_foreach_add_",
        "_foreach_mul_", "_foreach_lerp_", "_foreach_addcmul_", "_foreach_addcdiv_", "_foreach_sqrt",
        "_fused_adam_", "_fused_adamw_")},
}
NCCL_OPS = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allgather": "all_gather",
            "all_gather": "all_gather", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
            "reducescatter": "reduce_scatter", "reduce_scatter": "reduce_scatter",
            "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
            "alltoall": "all_to_all", "all_to_all": "all_to_all", "alltoall_base": "all_to_all",
            "broadcast": "broadcast", "reduce": "reduce", "send": "send_recv", "recv": "send_recv",
            "sendrecv": "send_recv"}
# NCCL kernel names: ncclDevKernel_<Coll>_... / ncclKernel_<Coll>_...
_NCCL_NAME = re.compile(r"^nccl(?:Dev)?Kernel_(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv)")
_NCCL_KERNEL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
                    "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "send_recv", "Send": "send_recv",
                    "Recv": "send_recv"}
# torch dtype names as the profiler prints them -> bytes
DTYPE_BYTES = {"float": 4, "Float": 4, "float32": 4, "c10::BFloat16": 2, "BFloat16": 2, "bfloat16": 2,
               "c10::Half": 2, "Half": 2, "half": 2, "double": 8, "Double": 8, "long int": 8, "Long": 8, "int": 4,
               "Int": 4, "c10::Float8_e4m3fn": 1, "Float8_e4m3fn": 1, "bool": 1, "unsigned char": 1, "Byte": 1}
TORCH_DTYPES = {"float": "fp32", "Float": "fp32", "c10::BFloat16": "bf16", "BFloat16": "bf16", "c10::Half": "fp16",
                "Half": "fp16", "c10::Float8_e4m3fn": "fp8"}


def classify_gpu(name: str) -> str:
    for pattern, cls in GPU_KERNEL_CLASSES:
        if re.search(pattern, name, re.IGNORECASE):
            return cls
    return "other"


def classify_cpu(name: str) -> str:
    return CPU_OP_CLASSES.get(name, "other")


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    category: str                   # gemm | attention_fwd | attention_bwd | elementwise | nccl | other
    dur_s: float
    op: str = ""                    # the CPU operator that launched it (GPU) or itself (CPU)
    dims: tuple[Any, ...] = ()      # Input Dims of that operator
    types: tuple[str, ...] = ()     # Input type of that operator
    concrete: tuple[Any, ...] = ()  # Concrete Inputs of that operator
    comm: tuple[tuple[str, Any], ...] = ()   # record_param_comms arguments (NCCL kernels)


@dataclass
class Trace:
    source: str
    device: str                     # "gpu" or "cpu"
    device_name: str
    kernels: list[Kernel] = field(default_factory=list)

    def by_category(self) -> dict[str, list[Kernel]]:
        out: dict[str, list[Kernel]] = {}
        for k in self.kernels:
            out.setdefault(k.category, []).append(k)
        return out


def _events(data: Any, source: str) -> list[dict[str, Any]]:
    events = data.get("traceEvents") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(events, list):
        raise InputError("--trace", source, "a PyTorch profiler Chrome trace (a JSON object with traceEvents)")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and _duration_us(e.get("dur"))
            and _duration_us(e.get("ts", 0), allow_zero=True)]


# A complete event's ``dur`` and ``ts`` are microseconds (Chrome trace event format); a profiled
# step lasts seconds, so a duration beyond a day (8.64e10 us) or a time stamp beyond 2**62 is not
# a measurement (a corrupt or hand-edited trace) and the event is left out.
MAX_EVENT_US = 8.64e10


def _duration_us(value: Any, allow_zero: bool = False) -> bool:
    """A finite, non-negative number of microseconds within the bounds above."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return 0 <= value <= (2**62 if allow_zero else MAX_EVENT_US)


def _self_times(ops: list[dict[str, Any]]) -> dict[int, float]:
    """Self time (us) of each CPU op: its duration less its direct children's, per thread."""
    out: dict[int, float] = {}
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in ops:
        by_tid.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            out[id(e)] = float(e["dur"])
            if stack:
                out[id(stack[-1])] -= float(e["dur"])
            stack.append(e)
    return out


def parse_trace(data: Any, source: str) -> Trace:
    events = _events(data, source)
    props = data.get("deviceProperties") if isinstance(data, dict) else None
    device_name = str(props[0].get("name", "")) if isinstance(props, list) and props and isinstance(props[0], dict) else ""
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    by_ext = {}
    for e in ops:
        ext = (e.get("args") or {}).get("External id")
        if ext is not None:
            by_ext[ext] = e  # the innermost op with this id wins (ops are listed outer first)
    gpu = [e for e in events if e.get("cat") == "kernel"]
    trace = Trace(source, "gpu" if gpu else "cpu", device_name)
    if gpu:
        for e in gpu:
            args = e.get("args") or {}
            op = by_ext.get(args.get("External id"), {})
            oargs = op.get("args") or {}
            comm = {k: v for k, v in {**oargs, **args}.items() if k in ("Collective name", "In msg nelems",
                                                                         "Out msg nelems", "dtype", "Group size",
                                                                         "Process Group Ranks")}
            trace.kernels.append(Kernel(str(e.get("name", "")), classify_gpu(str(e.get("name", ""))),
                                        float(e["dur"]) * 1e-6, str(op.get("name", "")),
                                        tuple(oargs.get("Input Dims", ())), tuple(oargs.get("Input type", ())),
                                        tuple(oargs.get("Concrete Inputs", ())), tuple(sorted(comm.items()))))
    else:
        selfs = _self_times(ops)
        for e in ops:
            cls = classify_cpu(str(e.get("name", "")))
            if cls == "other":
                continue
            args = e.get("args") or {}
            trace.kernels.append(Kernel(e["name"], cls, max(0.0, selfs[id(e)]) * 1e-6, e["name"],
                                        tuple(args.get("Input Dims", ())), tuple(args.get("Input type", ())),
                                        tuple(args.get("Concrete Inputs", ()))))
    useful = [k for k in trace.kernels if k.category != "other" and k.dur_s > 0]
    if not useful:
        raise InputError("--trace", source, "a profiler trace with GPU kernels (\"cat\": \"kernel\") or, from a CPU "
                         "run, aten compute operators (record_shapes=True); this one has none")
    return trace


def read_trace(path: str | Path) -> Trace:
    data = read_json_file(path, "--trace", "a PyTorch profiler Chrome trace (JSON)", max_bytes=MAX_TRACE_BYTES)
    return parse_trace(data, Path(path).name)


def nccl_op(kernel: Kernel) -> str | None:
    """The collective of an NCCL kernel (clustersim name), from its arguments or its name."""
    comm = dict(kernel.comm)
    name = str(comm.get("Collective name", "")).lower()
    if name in NCCL_OPS:
        return NCCL_OPS[name]
    m = _NCCL_NAME.match(kernel.name)
    return _NCCL_KERNEL_OPS[m.group(1)] if m else None
