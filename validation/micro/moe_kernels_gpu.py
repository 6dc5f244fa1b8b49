# ruff: noqa: B023, F821  (each closure is timed at once, inside its loop; the del frees GPU memory between cases)
"""MoE kernels on one GPU, in plain PyTorch: what the expert GEMMs and the token permutation cost.

Run on a machine with an NVIDIA GPU (not a test; writes one JSON file):

    python validation/micro/moe_kernels_gpu.py --out moe_kernels.json

1. ``dense``: bf16 ``A[M,K] @ B[K,N]`` at shapes of ``h100_gemm_bf16_2026-11-26.csv`` (to relate
   this GPU to the H100 of that table).
2. ``experts``: the six GEMMs of a SwiGLU expert MLP (fc1 forward / dgrad / wgrad, fc2 the same)
   over ``le`` local experts of ``tpe`` tokens each, at the per-GPU shapes of the MoE accuracy
   table's runs (Qwen3-30B-A3B, Qwen3-235B-A22B, gpt-oss-120b, DeepSeek-V3, Mixtral 8x7B at their
   published EP), three ways: ``grouped`` one ``torch._grouped_mm`` (CUTLASS grouped GEMM on
   Hopper, what Megatron-Core's grouped-GEMM path calls), ``loop`` one ``torch.mm`` per expert on
   one stream (SequentialMLP; TE's GroupedLinear issues one cuBLAS GEMM per expert), ``streams4``
   the same spread over four streams (TE's multi-stream cuBLAS path).
3. ``permute``: the forward permutation of ``T`` tokens copied ``k`` times (``index_select`` of
   rows) and the un-permutation (``index_add_`` of the ``k`` weighted copies), bytes counted as
   read + written.

Timing: CUDA events around ``reps`` back-to-back calls after ``warm`` warm-ups, median of
``rounds``; burst clocks (short runs).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

DENSE = [(8192, 8192, 8192), (2048, 2048, 2048), (4096, 2048, 2048), (4096, 2048, 8192), (4096, 8192, 2048),
         (4096, 4096, 4096), (4096, 4096, 14336), (4096, 14336, 4096), (8192, 4096, 14336)]
# (name, hidden, expert ffn, local experts, tokens per expert): per-GPU shapes of the MoE table's runs
EXPERTS = [("qwen3-30b-a3b ep16", 2048, 768, 8, 4096), ("qwen3-30b-a3b ep8", 2048, 768, 16, 2048),
           ("qwen3-235b-a22b ep32 sp2", 4096, 1536, 4, 4096), ("qwen3-235b-a22b ep8", 4096, 1536, 16, 2048),
           ("gpt-oss-120b ep8", 2880, 2880, 16, 1024), ("deepseek-v3 ep64", 7168, 2048, 4, 8192),
           ("mixtral-8x7b ep8", 4096, 14336, 1, 8192), ("qwen3-30b-a3b ep1", 2048, 768, 128, 256)]
PERMUTE = [("qwen3-30b-a3b", 4096, 2048, 8), ("deepseek-v3", 4096, 7168, 8), ("gpt-oss-120b", 4096, 2880, 4)]


def timed(fn, warm: int = 3, reps: int = 10, rounds: int = 5) -> float:
    """Median seconds per call."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / reps)
    return statistics.median(out)


def dense_rows() -> list[dict]:
    rows = []
    for m, k, n in DENSE:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        s = timed(lambda: a @ b)
        rows.append({"M": m, "K": k, "N": n, "time_s": s, "tflops": 2 * m * n * k / s / 1e12})
    return rows


def expert_rows() -> list[dict]:
    rows = []
    streams = [torch.cuda.Stream() for _ in range(4)]
    main = torch.cuda.current_stream()
    for name, h, f, le, tpe in EXPERTS:
        # per expert: (M, K, N) of the six GEMMs (fc1 = [h -> 2f] SwiGLU, fc2 = [f -> h])
        shapes = {"fc1_fwd": (tpe, h, 2 * f), "fc1_dgrad": (tpe, 2 * f, h), "fc1_wgrad": (h, tpe, 2 * f),
                  "fc2_fwd": (tpe, f, h), "fc2_dgrad": (tpe, h, f), "fc2_wgrad": (f, tpe, h)}
        for gemm, (m, k, n) in shapes.items():
            flops = 2.0 * m * n * k * le
            row = {"case": name, "gemm": gemm, "experts": le, "M": m, "K": k, "N": n}
            a_list = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(le)]
            b_list = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(le)]
            row["loop_s"] = timed(lambda: [x @ y for x, y in zip(a_list, b_list, strict=True)])

            def multi():
                for i, (x, y) in enumerate(zip(a_list, b_list, strict=True)):
                    st = streams[i % 4]
                    st.wait_stream(main)
                    with torch.cuda.stream(st):
                        x @ y
                for st in streams:
                    main.wait_stream(st)
            row["streams4_s"] = timed(multi)
            try:
                if gemm.endswith("wgrad"):
                    # wgrad: A^T [K = tokens] per group: x [tokens_total, M]^T @ g [tokens_total, N] -> [le, M, N]
                    xa = torch.randn(k * le, m, device="cuda", dtype=torch.bfloat16)   # [le*tpe, M]
                    ga = torch.randn(k * le, n, device="cuda", dtype=torch.bfloat16)
                    offs = torch.arange(1, le + 1, device="cuda", dtype=torch.int32) * k
                    row["grouped_s"] = timed(lambda: torch._grouped_mm(xa.t(), ga, offs=offs))
                else:
                    xa = torch.randn(m * le, k, device="cuda", dtype=torch.bfloat16)
                    wb = torch.randn(le, n, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                    offs = torch.arange(1, le + 1, device="cuda", dtype=torch.int32) * m
                    row["grouped_s"] = timed(lambda: torch._grouped_mm(xa, wb, offs=offs))
            except Exception as exc:  # noqa: BLE001 (a measurement script: record and go on)
                row["grouped_error"] = f"{type(exc).__name__}: {exc}"[:200]
            for impl in ("loop", "streams4", "grouped"):
                if f"{impl}_s" in row:
                    row[f"{impl}_tflops"] = flops / row[f"{impl}_s"] / 1e12
            rows.append(row)
            del a_list, b_list
        torch.cuda.empty_cache()
    return rows


def permute_rows() -> list[dict]:
    rows = []
    for name, t, h, k in PERMUTE:
        x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
        idx = torch.randperm(t * k, device="cuda") % t          # each token k times, sorted by a random expert order
        s = timed(lambda: x.index_select(0, idx))
        moved = (t * k * h * 2) * 2                               # rows read + written
        rows.append({"case": name, "op": "permute index_select", "tokens": t, "hidden": h, "topk": k,
                     "time_s": s, "bytes": moved, "GBps": moved / s / 1e9})
        y = torch.randn(t * k, h, device="cuda", dtype=torch.bfloat16)
        w = torch.rand(t * k, 1, device="cuda", dtype=torch.bfloat16)
        out = torch.zeros(t, h, device="cuda", dtype=torch.bfloat16)

        def unpermute():
            out.zero_()
            out.index_add_(0, idx, y * w)
        s = timed(unpermute)
        moved = t * k * h * 2 * 3 + t * h * 2 * 2                # y read, y*w written and read; out zeroed and written
        rows.append({"case": name, "op": "unpermute mul+index_add_", "tokens": t, "hidden": h, "topk": k,
                     "time_s": s, "bytes": moved, "GBps": moved / s / 1e9})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    res["dense"] = dense_rows()
    res["experts"] = expert_rows()
    res["permute"] = permute_rows()
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    for r in res["dense"]:
        print(f"dense {r['M']}x{r['K']}x{r['N']}: {r['tflops']:.0f} TFLOP/s")
    for r in res["experts"]:
        print(f"{r['case']:28s} {r['gemm']:10s} le={r['experts']:3d} {r['M']}x{r['K']}x{r['N']}: "
              + " ".join(f"{i}={r.get(i + '_tflops', float('nan')):.0f}" for i in ("grouped", "loop", "streams4"))
              + (f" [{r['grouped_error']}]" if "grouped_error" in r else ""))
    for r in res["permute"]:
        print(f"{r['case']:16s} {r['op']:26s} {r['GBps']:.0f} GB/s")


if __name__ == "__main__":
    main()
