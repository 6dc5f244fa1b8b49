"""Compute benchmarks: fp32 GEMMs over a shape sweep and a large memory copy, measured
together with their samples interleaved (validation.timing.timed_interleaved), so that fit and
held-out shapes see the same machine load.

Every rank of the group runs the same kernel at the same time, each on its own core with one
thread, so the rate measured is the rate a rank gets during a training step.
"""

from __future__ import annotations

from typing import Any

import torch

from validation.timing import timed_interleaved


def _kernel(item: dict[str, Any], device: torch.device):
    if item["bench"] == "gemm":
        m, n, k = item["m"], item["n"], item["k"]
        a = torch.randn(m, k, device=device)
        b = torch.randn(k, n, device=device)
        c = torch.empty(m, n, device=device)
        return (lambda: torch.mm(a, b, out=c)), {"flops": 2.0 * m * n * k}  # one multiply-add per (m, n, k)
    if item["bench"] == "memcpy":
        src = torch.ones(item["size_bytes"] // 4, device=device)
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), {"bytes_moved": 2.0 * item["size_bytes"]}  # read + write
    raise ValueError(f"unknown compute bench {item['bench']}")


def run_compute_sweep(params: dict[str, Any], group: Any, device: torch.device, sampling: Any,
                      ) -> list[dict[str, Any]]:
    """One result per item of ``params["items"]`` (each a case: name, role, params)."""
    kernels = [_kernel(item["params"], device) for item in params["items"]]
    timed = timed_interleaved([fn for fn, _ in kernels], group, sampling.warmup, sampling.samples,
                              sampling.compute_min_sample_s)
    return [{**res, **extra} for (_, extra), res in zip(kernels, timed, strict=True)]
