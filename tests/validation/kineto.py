"""A GPU-shaped PyTorch profiler (Kineto) trace with realistic kernel names, built for tests.

The layout follows torch.profiler's export_chrome_trace: ``cpu_op`` events with ``Input Dims``,
``Input type`` and ``External id``; ``kernel`` events on a CUDA stream whose ``External id``
points at the operator that launched them; NCCL kernels carrying the record_param_comms
arguments. Kernel names are real ones (cuBLAS sm90_xmma / nvjet, FlashAttention-2, ATen
elementwise, NCCL 2.19+). The durations are planted: GEMMs run at ``gemm_scale`` of the compute
model's speed, attention at ``attention_scale``, memory-bound kernels at ``hbm_efficiency`` of
HBM bandwidth, all_reduce at ``nccl_busbw_GBps``, so a fit must find those numbers again.
"""

from __future__ import annotations

import json
from typing import Any

GEMM_KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off"
                "_kernel__5x_cublas", "nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNN",
                "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(Params)")
FLASH_FWD = ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
             "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, true, false, false, false, true, true, false"
             ", false>(Flash_fwd_params)")
FLASH_BWD = ("void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, "
             "false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, "
             "false, false, false, false, true, false>(Flash_bwd_params)")
ADD_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
              "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
NORM_KERNEL = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
               "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def gpu_trace(*, gpu, gemm_scale: float, attention_scale: float, hbm_efficiency: float, nccl_busbw_GBps: float,
              steps: int = 2) -> dict[str, Any]:
    """A trace of ``steps`` training steps of a Llama-like layer on ``gpu`` (a GpuSpec)."""
    from dataclasses import replace

    from clustersim.compute.attention import attention_ops
    from clustersim.compute.gemm import gemm_efficiency, gemm_op
    g1 = replace(gpu, gemm_scale=1.0, attention_scale=1.0, hbm_efficiency=0.0, compute_scale=1.0)
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
                                     "tid": 1, "ts": 1000.0 + i * 1e6, "dur": 9e5} for i in range(steps)]
    ext = [100]
    ts = [2000.0]

    def launch(op: str, dims: list[Any], types: list[str], kernel: str, dur_s: float,
               extra: dict[str, Any] | None = None, concrete: list[str] | None = None) -> None:
        ext[0] += 1
        args = {"External id": ext[0], "Input Dims": dims, "Input type": types,
                "Concrete Inputs": concrete or [""] * len(dims), "Sequence number": ext[0]}
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts[0], "dur": 8.0,
                       "args": args})
        kargs = {"External id": ext[0], "device": 0, "stream": 7, "correlation": 5000 + ext[0],
                 "registers per thread": 168, "grid": [132, 1, 1], "block": [384, 1, 1]}
        kargs.update(extra or {})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts[0] + 20.0,
                       "dur": round(dur_s * 1e6, 3), "args": kargs})
        ts[0] += dur_s * 1e6 + 30.0

    tokens, h, ffn, heads, d, seq = 8192, 4096, 14336, 32, 128, 8192
    bf = "c10::BFloat16"
    for _ in range(steps):
        for i, (m, n, k) in enumerate(((tokens, 3 * h, h), (tokens, h, h), (tokens, 2 * ffn, h), (tokens, h, ffn))):
            op = gemm_op("g", m, n, k, g1, "bf16")
            compute = op.flops / (g1.peak("bf16") * gemm_efficiency(m, n, k, g1, "bf16"))
            launch("aten::mm", [[m, k], [k, n]], [bf, bf], GEMM_KERNELS[i % 3], compute / gemm_scale)
        fwd, bwd = attention_ops(1, seq, seq, heads, heads, d, g1, "bf16", 2, True)
        q = [1, heads, seq, d]
        launch("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], []], [bf, bf, bf, "Scalar", "Scalar", ""],
               FLASH_FWD, fwd.time_s / attention_scale, concrete=["", "", "", "0.", "True", ""])
        launch("aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q, q, [1, heads, seq]],
               [bf] * 5 + ["float"], FLASH_BWD, bwd.time_s / attention_scale, concrete=["", "", "", "", "", "", "True"])
        nbytes = 3 * tokens * h * 2          # read two tensors, write one
        launch("aten::add", [[tokens, h], [tokens, h], []], [bf, bf, "Scalar"], ADD_KERNEL,
               nbytes / (gpu.hbm_bw_bytes_per_s * hbm_efficiency))
        launch("aten::native_layer_norm", [[tokens, h], [h], [h], []], [bf, bf, bf, "Scalar"], NORM_KERNEL,
               (tokens * h * 2 * 2 + 2 * h * 2) / (gpu.hbm_bw_bytes_per_s * hbm_efficiency))
        for size in (64 * 2**20, 256 * 2**20):
            n = size // 2
            launch("record_param_comms", [[n]], [bf], NCCL_AR, size * 2 * 7 / 8 / (nccl_busbw_GBps * 1e9),
                   {"Collective name": "allreduce", "In msg nelems": n, "Out msg nelems": n, "dtype": "BFloat16",
                    "Group size": 8, "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem":
                                                      85045231616, "computeMajor": 9, "computeMinor": 0}],
            "traceEvents": events, "traceName": "rank0.pt.trace.json", "displayTimeUnit": "ms"}


def write(path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data))
