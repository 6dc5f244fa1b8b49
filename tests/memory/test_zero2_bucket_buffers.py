"""ZeRO-2 holds one gradient bucket buffer without overlap_grad_reduce and two with it: DeepSpeed's
stage_1_and_2.py setup_buckets allocates buf_1 only ``if self.overlap_comm`` ("Use double buffers to
avoid data access conflict when overlap_comm is enabled"; deepspeedai/DeepSpeed edaa722). Two were
counted either way (Llama 2 7B, reduce_bucket_size 5e8: comm_buffers 1.86 GiB with overlap_comm false)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from clustersim import api
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.screen import screen_shape
from clustersim.sweep.space import SearchSpace, layout_from_key, micro_batch_sizes, shapes

BUCKET_BYTES = 500_000_000 * 2   # DeepSpeed's reduce_bucket_size 5e8 elements in bf16


def make(overlap: bool, zero: int = 2):
    return scenario_from_dict({
        "framework": "deepspeed", "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
        "parallel": {"dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": zero, "recompute": "full",
                     "overlap_grad_reduce": overlap},
        "training": {"dtype": "bf16"}})


def test_zero2_holds_the_second_bucket_only_with_overlap():
    one, two = api.estimate(make(False)).memory, api.estimate(make(True)).memory
    assert two.comm_buffers - one.comm_buffers == BUCKET_BYTES
    assert one.comm_buffers == BUCKET_BYTES        # nothing else in comm_buffers at dp 8, no PP / SP
    assert two.peak_bytes_per_gpu - one.peak_bytes_per_gpu >= BUCKET_BYTES


def test_the_sweep_screen_counts_one_bucket_without_overlap():
    s = make(False)
    space = replace(SearchSpace(), framework=s.framework)
    gb = s.parallel.global_batch
    table = np.concatenate([screen_shape(s, x, tuple(micro_batch_sizes(x, gb)), space, exact=True)
                            for x in shapes(s.model, s.cluster, gb)])
    rows = [r for r in table if int(r[7]) == 2]
    assert rows
    for row in random.Random(5).sample(rows, min(6, len(rows))):
        layout = layout_from_key(tuple(int(v) for v in row[:13]), s.parallel)
        assert not layout.overlap_grad_reduce
        assert row[14] == api.estimate(replace(s, parallel=layout)).memory.peak_bytes_per_gpu
        with_overlap = replace(s, parallel=replace(layout, overlap_grad_reduce=True))
        assert api.estimate(with_overlap).memory.comm_buffers > api.estimate(replace(s, parallel=layout)).memory.comm_buffers
