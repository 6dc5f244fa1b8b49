"""Compute benchmarks: fp32 GEMM over a shape sweep and a large memory copy.

Every rank of the group runs the same kernel at the same time, each on its own core with one
thread, so the rate measured is the rate a rank gets during a training step.
"""

from __future__ import annotations

from typing import Any

import torch

from validation.timing import timed_samples


def run_compute(params: dict[str, Any], group: Any, device: torch.device, sampling: Any) -> dict[str, Any]:
    if params["bench"] == "gemm":
        m, n, k = params["m"], params["n"], params["k"]
        a = torch.randn(m, k, device=device)
        b = torch.randn(k, n, device=device)
        c = torch.empty(m, n, device=device)
        res = timed_samples(lambda: torch.mm(a, b, out=c), group, sampling.warmup, sampling.samples,
                            sampling.compute_min_sample_s)
        res["flops"] = 2.0 * m * n * k  # one multiply and one add per (m, n, k) triple
        return res
    if params["bench"] == "memcpy":
        n = params["size_bytes"] // 4
        src = torch.ones(n, device=device)
        dst = torch.empty_like(src)
        res = timed_samples(lambda: dst.copy_(src), group, sampling.warmup, sampling.samples,
                            sampling.compute_min_sample_s)
        res["bytes_moved"] = 2.0 * params["size_bytes"]  # read the source, write the destination
        return res
    raise ValueError(f"unknown compute bench {params['bench']}")
