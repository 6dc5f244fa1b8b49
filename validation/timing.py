"""Timing inside a process group: warm up, then the median over a steady window.

Every sample starts after a barrier of the group, times ``reps`` back-to-back calls, and is
reduced with MAX over the group's ranks (the slowest rank finishes the collective or step).
``reps`` is chosen once, from the last (timed) warm-up call, so that a sample lasts ``min_sample_s``
(small messages on loopback are bimodal; averaging a burst of calls steadies them) and is
agreed on by all ranks through a MAX all-reduce.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def _max_over(values: list[float], group: Any) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()  # GPU kernels run asynchronously: wait before reading the clock


def timed_samples(fn: Callable[[], None], group: Any, warmup: int, samples: int,
                  min_sample_s: float, max_reps: int = 200) -> dict[str, Any]:
    """Time ``fn`` (called on every rank of ``group``); returns median, samples and reps."""
    for _ in range(max(0, warmup - 1)):
        fn()
    _sync()
    t0 = time.perf_counter()
    fn()  # the last warm-up call sets how many calls make one sample
    _sync()
    last_warm_s = _max_over([time.perf_counter() - t0], group)[0]
    reps = int(min(max_reps, max(1, math.ceil(min_sample_s / max(last_warm_s, 1e-9)))))
    per_call: list[float] = []
    cpu: list[float] = []
    for _ in range(samples):
        dist.barrier(group=group)
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(reps):
            fn()
        _sync()
        per_call.append((time.perf_counter() - t0) / reps)
        cpu.append((time.thread_time() - c0) / reps)
    steady = _max_over(per_call, group)
    # CPU time of the calling thread, for diagnosis only: wall >> cpu in a compute case means
    # the rank waited for a core (other work on the machine), not for data
    cpu_max = _max_over(cpu, group)
    return {"measured_s": statistics.median(steady), "samples_s": steady, "reps": reps,
            "cpu_s": statistics.median(cpu_max)}


def timed_interleaved(fns: list[Callable[[], None]], group: Any, warmup: int, samples: int,
                      min_sample_s: float, max_reps: int = 200) -> list[dict[str, Any]]:
    """Like timed_samples for several kernels at once, taking their samples round-robin
    (sample 1 of every kernel, then sample 2, ...), so that all of them see the same machine
    load: a paired design, for comparing kernels on a machine shared with other work."""
    reps = []
    for fn in fns:
        for _ in range(max(1, warmup)):
            t0 = time.perf_counter()
            fn()
            _sync()
            last_s = time.perf_counter() - t0
        last_s = _max_over([last_s], group)[0]
        reps.append(int(min(max_reps, max(1, math.ceil(min_sample_s / max(last_s, 1e-9))))))
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for i, fn in enumerate(fns):
            dist.barrier(group=group)
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(reps[i]):
                fn()
            _sync()
            wall[i].append((time.perf_counter() - t0) / reps[i])
            cpu[i].append((time.thread_time() - c0) / reps[i])
    out = []
    for i in range(len(fns)):
        steady = _max_over(wall[i], group)
        cpu_max = _max_over(cpu[i], group)
        out.append({"measured_s": statistics.median(steady), "samples_s": steady, "reps": reps[i],
                    "cpu_s": statistics.median(cpu_max)})
    return out


def reset_memory_peaks() -> None:
    """Start counting the GPU's peak memory anew (no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def memory_peaks(group: Any) -> dict[str, int | None]:
    """The steps' peak memory beside their times, the MAX over the group's ranks:
    ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` (what clustersim's
    ``allocated_peak_bytes`` and ``reserved_peak_bytes`` minus the CUDA context and NCCL buffers
    predict; docs/memory.md). None on CPU, where the CUDA caching allocator does not run."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return {"max_memory_allocated_bytes": None, "max_memory_reserved_bytes": None}
    peaks = _max_over([float(torch.cuda.max_memory_allocated()), float(torch.cuda.max_memory_reserved())], group)
    return {"max_memory_allocated_bytes": int(peaks[0]), "max_memory_reserved_bytes": int(peaks[1])}
