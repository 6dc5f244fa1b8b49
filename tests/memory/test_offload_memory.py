"""Optimizer offload's memory (clustersim.memory.report.gpu_states / offload): with ZeRO-2/3 the
gradient partition lives on the host, not the GPU (DeepSpeed stage_1_and_2.py copy_grads_in_partition
returns before allocating grads_in_partition under cpu_offload; stage3.py grad_partitions_flat_buffer
on the cpu device; deepspeedai/DeepSpeed edaa722), the GPU keeps its reduction buckets, and the host
counts the optimizer states and one fp32 copy of the stepped gradients (not the GPU's 16-bit ones again)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from clustersim import api
from clustersim.memory.report import HOST_GRAD_BYTES_PER_PARAM, optimizer_shard, states
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.screen import screen_shape
from clustersim.sweep.space import SearchSpace, layout_from_key, micro_batch_sizes, shapes


def make(zero: int, offload: dict | None = None, **par):
    return scenario_from_dict({
        "framework": "deepspeed", "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
        "parallel": {"dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": zero, "recompute": "full",
                     **({"offload": offload} if offload else {}), **par},
        "training": {"dtype": "bf16"}})


def _memory(sc):
    return api.estimate(sc).memory


@pytest.mark.parametrize("zero", [2, 3])
def test_zero2_and_zero3_offload_keep_no_gradient_partition_on_the_gpu(zero):
    off = {"optimizer": True, **({"params": True} if zero == 3 else {})}
    plain, offl = _memory(make(zero)), _memory(make(zero, off))
    assert plain.gradients > 0
    assert offl.gradients == 0 and offl.optimizer_states == 0
    assert offl.comm_buffers == plain.comm_buffers        # the reduction buckets stay on the GPU
    sc = make(zero, off)
    w, _, o = states(sc.model, sc.parallel, "bf16", sc.model.layers, True, True, sc.framework)
    shard = optimizer_shard(sc.model, sc.parallel, sc.model.layers, True, True)
    # the host: optimizer states + one fp32 gradient per stepped parameter (+ the ZeRO-3 weights)
    assert offl.host_bytes_per_gpu == round(o + HOST_GRAD_BYTES_PER_PARAM * shard + (w if zero == 3 else 0))


def test_zero1_offload_keeps_the_unsharded_gradients_on_the_gpu():
    plain, offl = _memory(make(1)), _memory(make(1, {"optimizer": True}))
    assert offl.gradients == plain.gradients > 0
    assert offl.optimizer_states == 0


def test_the_sweep_screen_prices_offloaded_layouts_as_the_engine():
    s = make(2, {"optimizer": True})
    space = replace(SearchSpace(offload=(True,)), framework=s.framework)
    gb = s.parallel.global_batch
    table = np.concatenate([screen_shape(s, x, tuple(micro_batch_sizes(x, gb)), space, exact=True)
                            for x in shapes(s.model, s.cluster, gb)])
    rows = [r for r in table if int(r[7]) >= 2]     # ZeRO-2/3 rows: no gradient partition on the GPU
    assert rows
    for row in random.Random(3).sample(rows, min(12, len(rows))):
        layout = layout_from_key(tuple(int(v) for v in row[:13]), s.parallel)
        assert layout.offload_optimizer
        assert row[14] == _memory(replace(s, parallel=layout)).peak_bytes_per_gpu
