"""Training steps of the small GPT under DP (DistributedDataParallel), ZeRO-1
(ZeroRedundancyOptimizer), ZeRO-3 (FSDP2 fully_shard), TP (Megatron column/row-parallel layers) and PP (1F1B with
send/recv). One step = ``micro_batches`` forward/backward passes per replica, then Adam.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from validation.gpt import GPT, batch
from validation.timing import memory_peaks, reset_memory_peaks, timed_interleaved


def _data(cfg: dict[str, Any], rank: int, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [tuple(t.to(device) for t in batch(cfg, seed=1000 * rank + i))  # type: ignore[misc]
            for i in range(cfg["micro_batches"])]


def _ddp_step_fn(cfg: dict[str, Any], group: Any, rank: int, zero1: bool, device: torch.device):
    torch.manual_seed(0)
    model = DDP(GPT(cfg).to(device), process_group=group)
    if zero1:
        opt: Any = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                           process_group=group, lr=1e-4)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = _data(cfg, rank, device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(data):
            if i < len(data) - 1:
                with model.no_sync():  # gradient accumulation: all-reduce only after the last micro-batch
                    model(x, y).backward()
            else:
                model(x, y).backward()
        opt.step()
    return step


def _fsdp_step_fn(cfg: dict[str, Any], group: Any, rank: int, device: torch.device):
    """ZeRO-3 with FSDP2 (``fully_shard`` per block and the root): parameters all-gathered for
    each forward and backward, gradients reduce-scattered once per step (gradient sync off for
    all but the last micro-batch)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    mesh = DeviceMesh.from_group(group, device_type=device.type)
    model = GPT(cfg).to(device)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = _data(cfg, rank, device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(data):
            model.set_requires_gradient_sync(i == len(data) - 1)
            model(x, y).backward()
        opt.step()
    return step


def _tp_step_fn(cfg: dict[str, Any], group: Any, rank: int, device: torch.device):
    torch.manual_seed(rank)
    tp = dist.get_world_size(group)
    model = GPT(cfg, tp=tp, tp_rank=rank, tp_group=group).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = _data(cfg, 0, device)  # every TP rank sees the same micro-batches

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for x, y in data:
            model(x, y).backward()
        opt.step()
    return step


def _pp_step_fn(cfg: dict[str, Any], group: Any, rank: int, device: torch.device):
    """1F1B (Narayanan et al. 2021, arXiv:2104.04473 §2.2): stage r runs pp - r - 1 warm-up
    forwards, then alternates one forward and one backward, then drains the backwards."""
    pp = dist.get_world_size(group)
    per = cfg["layers"] // pp
    torch.manual_seed(rank)
    model = GPT(cfg, first_layer=rank * per, last_layer=(rank + 1) * per if rank < pp - 1 else None).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = _data(cfg, 0, device)
    m = len(data)
    shape = (cfg["micro_batch"], cfg["seq_len"], cfg["hidden"])
    ranks = dist.get_process_group_ranks(group)
    prev_rank = ranks[rank - 1] if rank > 0 else None
    next_rank = ranks[rank + 1] if rank < pp - 1 else None

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        inputs: dict[int, torch.Tensor] = {}
        outputs: dict[int, torch.Tensor] = {}
        pending: list[Any] = []

        def forward(i: int) -> None:
            x, y = data[i]
            if model.is_first:
                h = model.embed(x)
            else:
                h = torch.empty(shape, device=device)
                dist.recv(h, src=prev_rank, group=group)
                h.requires_grad_(True)
                inputs[i] = h
            out = model.body(h)
            if model.is_last:
                outputs[i] = model.loss(out, y) / m
            else:
                outputs[i] = out
                pending.append(dist.isend(out.detach().contiguous(), dst=next_rank, group=group))

        def backward(i: int) -> None:
            out = outputs.pop(i)
            if model.is_last:
                out.backward()
            else:
                g = torch.empty(shape, device=device)
                dist.recv(g, src=next_rank, group=group)
                out.backward(g)
            if not model.is_first:
                h = inputs.pop(i)
                pending.append(dist.isend(h.grad.contiguous(), dst=prev_rank, group=group))

        warm = min(pp - rank - 1, m)
        for i in range(warm):
            forward(i)
        for i in range(m - warm):
            forward(warm + i)
            backward(i)
        for i in range(m - warm, m):
            backward(i)
        for req in pending:
            req.wait()
        opt.step()
    return step


def _local_step_fn(cfg: dict[str, Any], rank: int, device: torch.device):
    """The probe: the whole model's step on this rank alone (the same micro-batches, Adam), no
    communication. Its time is the compute the simulator's ``compute_scale`` describes."""
    torch.manual_seed(0)
    model = GPT(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = _data(cfg, rank, device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for x, y in data:
            model(x, y).backward()
        opt.step()
    return step


def run_step(kind: str, params: dict[str, Any], group: Any, rank: int, sampling: Any,
             device: torch.device | None = None) -> dict[str, Any]:
    """Time one training step of ``kind``; ``device`` is the rank's GPU with NCCL, else the CPU.

    Each sample of the distributed step is paired with a sample of the local probe
    (``_local_step_fn``), taken right before it (timing.timed_interleaved): the machine's compute
    rate at the time of the step, whatever else the machine runs (docs/validation.md). The memory
    peaks are those of the distributed step alone, measured before the probe's model exists."""
    cfg = params["model"]
    device = device or torch.device("cpu")
    if kind in ("ddp_step", "zero1_step"):
        fn = _ddp_step_fn(cfg, group, rank, zero1=kind == "zero1_step", device=device)
    elif kind == "fsdp_step":
        fn = _fsdp_step_fn(cfg, group, rank, device)
    elif kind == "tp_step":
        fn = _tp_step_fn(cfg, group, rank, device)
    elif kind == "pp_step":
        fn = _pp_step_fn(cfg, group, rank, device)
    else:
        raise ValueError(f"unknown step kind {kind}")
    for _ in range(max(1, sampling.warmup - 1)):   # warm-up: allocator, buffers, communicators
        fn()
    reset_memory_peaks()
    fn()
    peaks = memory_peaks(group)
    probe = _local_step_fn(cfg, rank, device)
    # a step is long: one call per sample, no back-to-back repetition
    local, result = timed_interleaved([probe, fn], group, 1, sampling.samples, min_sample_s=0.0, max_reps=1)
    return {**result, "probe_local_step_s": local["measured_s"], "probe_samples_s": local["samples_s"], **peaks}
