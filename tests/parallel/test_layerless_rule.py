"""One rule for a pipeline rank without a decoder layer (clustersim.parallel.split.empty_ranks):
``parallel.layers_per_stage: [0, 16, 16, 0]`` had been refused ("the first and the last may be 0
if their rank holds layers in another chunk") while the same split as Megatron-Core's
``pipeline_layout: "E|t*16|t*16|L"`` was accepted and ran as layers per stage [0, 16, 16, 0]."""

from __future__ import annotations

import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict


def _job(**split) -> dict:
    return {"name": "layerless", "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
            "parallel": {"tp": 2, "pp": 4, "dp": 2, "micro_batch": 1, "global_batch": 32, "zero_stage": 1,
                         "schedule": "1f1b", **split},
            "training": {"dtype": "bf16"}}


def test_layers_per_stage_and_pipeline_layout_agree() -> None:
    given = scenario_from_dict(_job(layers_per_stage=[0, 16, 16, 0]))
    layout = scenario_from_dict(_job(pipeline_layout="E|t*16|t*16|L"))
    assert given.parallel.layers_per_stage == layout.parallel.layers_per_stage == (0, 16, 16, 0)
    a, b = api.estimate(given), api.estimate(layout)
    assert a.step_time_s == b.step_time_s and a.memory.peak_bytes_per_gpu == b.memory.peak_bytes_per_gpu


@pytest.mark.parametrize("counts,layout", [([16, 0, 0, 16], "Et*16|||t*16L"), ([8, 8, 0, 8, 8, 0, 0, 0], None)])
def test_a_rank_holding_nothing_is_refused_both_ways(counts, layout) -> None:
    split = {"schedule": "interleaved-1f1b", "virtual_stages": 2} if len(counts) == 8 else {}
    with pytest.raises(InputError) as err:
        scenario_from_dict(_job(layers_per_stage=counts, **split))
    assert err.value.field == "parallel.layers_per_stage" and "would hold nothing" in str(err.value)
    assert "the embedding (the first stage) or the loss (the last stage)" in str(err.value)
    if layout:
        with pytest.raises(InputError) as err:
            scenario_from_dict(_job(pipeline_layout=layout))
        assert err.value.field == "parallel.pipeline_layout" and "would hold nothing" in str(err.value)


def test_interleaved_middle_chunk_may_be_empty_where_the_rank_holds_the_embedding() -> None:
    # rank 0 holds model stages 0 and 4 of 8 (pp 4 x 2 chunks): no layer, but the embedding
    counts = [0, 5, 5, 5, 0, 6, 6, 5]
    s = scenario_from_dict(_job(layers_per_stage=counts, schedule="interleaved-1f1b", virtual_stages=2))
    assert s.parallel.layers_per_stage == tuple(counts)
