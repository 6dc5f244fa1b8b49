"""The sweep screens host memory with the rule `run` reports as ``memory.host``
(clustersim.memory.host.host_memory): a layout whose offloaded states need more than a node's host
memory is not ranked as fitting, and the reason is given."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.evaluate import COL, KEY_FIELDS
from clustersim.sweep.space import layout_from_key

GiB = 2**30


def _offloading(host_gib: float):
    """Llama 2 7B cut to 27 layers under DeepSpeed ZeRO-2 with optimizer offload on two DGX A100
    whose host memory is ``host_gib``: a node offloads 42.67 GiB with one pipeline stage (half
    of every replica's states), 44.17 GiB with 2, 4 or 8 (the first node holds the 14 layers of
    the first half of the stages and the embedding)."""
    sc = scenario_from_dict({"name": "offload", "framework": "deepspeed", "model": {"preset": "llama2-7b", "layers": 27},
                             "cluster": {"preset": "dgx-a100", "nodes": 2},
                             "parallel": {"dp": 16, "micro_batch": 1, "global_batch": 64, "zero_stage": 2,
                                          "offload": {"optimizer": True}, "recompute": "full"},
                             "training": {"dtype": "bf16"}})
    return replace(sc, cluster=replace(sc.cluster, host_memory_bytes=int(host_gib * GiB)))


def test_layouts_that_do_not_fit_host_memory_are_not_ranked():
    """With 43.5 GiB of host memory per node the pipelined layouts (44.2 GiB offloaded on the first
    node, `run` of them: memory.host does-not-fit) are screened out with a reason, and every
    ranked layout's `run` fits the host."""
    sc = _offloading(43.5)
    with pytest.raises(InputError, match="host memory") as err:
        api.sweep(sc, top=3, executor="serial", fix=["parallel.pp=4"])
    assert "44.2 GiB per node" in str(err.value)
    res = api.sweep(sc, top=3, executor="serial")
    t = res.table
    host = np.flatnonzero((t[:, COL["fits"]] == 0.0) & (t[:, COL["verdict"]] != 2.0))
    assert res.host_unfit == host.size > 0
    assert all(t[i, COL["pp"]] >= 2 for i in host)
    rows = [int(i) for i in res.row_indices(3)]
    assert rows
    for i in [*rows, int(host[0])]:   # ranked rows and a screened-out one, against `run`'s rule
        layout = layout_from_key(tuple(int(x) for x in t[i, :len(KEY_FIELDS)]), res.spec.scenario.parallel)
        report = api.estimate(replace(res.spec.scenario, parallel=layout))
        assert report.host is not None
        assert report.host.fits == (i in rows), (i, report.host_memory)


def test_host_memory_that_holds_every_layout_changes_nothing():
    res = api.sweep(_offloading(1024), top=1, executor="serial")
    assert res.host_unfit == 0 and res.fitting == int((res.table[:, COL["verdict"]] != 2.0).sum())


def test_the_screens_row_columns_are_the_sweeps():
    """The screen marks host-unfit rows by column number (clustersim.sweep.rows): the same columns
    as the sweep's table (clustersim.sweep.evaluate.COL)."""
    from clustersim.sweep.evaluate import COL, KEY_FIELDS, SCREEN_FIELDS
    from clustersim.sweep.rows import (
        FITS_COL,
        KEY_WIDTH,
        OFFLOAD_OPTIMIZER_COL,
        RECOMPUTE_COL,
        ROW_WIDTH,
        SEQUENCE_PARALLEL_COL,
    )

    assert (len(KEY_FIELDS), len(KEY_FIELDS + SCREEN_FIELDS)) == (KEY_WIDTH, ROW_WIDTH)
    assert (COL["fits"], COL["offload_optimizer"]) == (FITS_COL, OFFLOAD_OPTIMIZER_COL)
    assert (COL["recompute"], COL["sequence_parallel"]) == (RECOMPUTE_COL, SEQUENCE_PARALLEL_COL)
