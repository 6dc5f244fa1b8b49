"""Point-to-point and collective benchmarks (gloo on CPUs, NCCL on GPUs).

Sizes follow nccl-tests: the full buffer for all_reduce/broadcast/reduce, the gathered total
for all_gather/reduce_scatter/all_to_all, the message for send_recv. send_recv is timed as a
ping-pong between ranks 0 and 1 and reported as half the round trip (one-way time of one
message), as a p2p transfer of a pipeline stage pays it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from validation.timing import timed_samples


def _elements(size_bytes: int, world: int, dtype: torch.dtype) -> int:
    esize = torch.tensor([], dtype=dtype).element_size()
    n = max(world, size_bytes // esize)
    return n - n % world  # divisible by the world size, like nccl-tests' count


def make_op(op: str, size_bytes: int, group: Any, world: int, rank: int, device: torch.device):
    """A zero-argument callable that runs ``op`` once on this rank."""
    dtype = torch.float32
    n = _elements(size_bytes, world, dtype)
    full = torch.ones(n, dtype=dtype, device=device)
    shard = torch.ones(n // world, dtype=dtype, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full, group=group)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(full, shard, group=group)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(shard, full, group=group)
    if op == "all_to_all":
        out = torch.empty_like(full)
        return lambda: dist.all_to_all_single(out, full, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(full, src=0, group=group)
    if op == "reduce":
        return lambda: dist.reduce(full, dst=0, group=group)
    if op == "send_recv":
        peer = 1 - rank

        def ping_pong() -> None:
            if rank == 0:
                dist.send(full, dst=peer, group=group)
                dist.recv(full, src=peer, group=group)
            else:
                dist.recv(full, src=peer, group=group)
                dist.send(full, dst=peer, group=group)
        return ping_pong
    raise ValueError(f"unknown collective {op}")


def run_collective(params: dict[str, Any], group: Any, rank: int, device: torch.device,
                   sampling: Any) -> dict[str, Any]:
    op, world = params["op"], params["world"]
    fn = make_op(op, params["size_bytes"], group, world, rank, device)
    res = timed_samples(fn, group, sampling.warmup, sampling.samples, sampling.min_sample_s)
    if op == "send_recv":  # a ping-pong is two one-way messages
        res["measured_s"] /= 2
        res["samples_s"] = [s / 2 for s in res["samples_s"]]
    return res
