"""A pipeline rank that the split leaves only the embedding and/or the loss (clustersim.parallel.split):
the Zero Bubble paper's ZB-V runs (arXiv 2401.10241 §6, Tables 6-7), whose code pads 30 / 46 / 62
layers to 2 pp chunks of one layer with the first and the last chunk one fewer
(--allow-padding-num-layers, megatron/model/transformer.py get_offset, sail-sg/zero-bubble-pipeline-
parallelism branch `arxiv`) and puts both on rank 0. The V schedules' layer rule counts the split's
weights (clustersim.parallel.rules)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from clustersim.errors import InputError
from clustersim.parallel.split import framework_split
from clustersim.scenario import scenario_from_dict


def layout(**kw) -> SimpleNamespace:
    base = dict(pp=1, virtual_stages=1, schedule="zb-v", layers_per_stage=(), first_stage_layers=0,
                last_stage_layers=0, account_for_embedding=0, account_for_loss=0, pipeline_layout="")
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.mark.parametrize("layers, pp", [(30, 16), (46, 24), (62, 32)])
def test_zbv_paper_split_leaves_rank_0_the_embedding_and_the_loss(layers, pp) -> None:
    # 2 pp chunks of one layer, the first and the last (both on rank 0 in the V) one fewer: none
    counts = framework_split(layout(pp=pp, account_for_embedding=1, account_for_loss=1), layers)
    assert counts == (0,) + (1,) * layers + (0,)


def test_one_end_alone_is_enough() -> None:
    # 1F1B, 3 layers + one end counted = 4 stages: the rank with that end holds nothing else
    assert framework_split(layout(pp=4, schedule="1f1b", account_for_embedding=1), 3) == (0, 1, 1, 1)
    assert framework_split(layout(pp=4, schedule="1f1b", account_for_loss=1), 3) == (1, 1, 1, 0)


def scenario(layers: int, pp: int, **parallel) -> dict:
    par = {"tp": 1, "pp": pp, "dp": 1, "micro_batch": 1, "global_batch": 4 * pp, "schedule": "zb-v"}
    par.update(parallel)
    return {"model": {"preset": "llama3-8b", "layers": layers, "seq_len": 1024},
            "cluster": {"preset": "dgx-a100", "nodes": 2}, "parallel": par}


def test_v_rule_counts_the_embedding_and_the_loss() -> None:
    sc = scenario_from_dict(scenario(30, 16, account_for_embedding=True, account_for_loss=True))
    assert sc.parallel.layers_per_stage == (0,) + (1,) * 30 + (0,)
    # without the weights 30 layers cannot fill 32 chunks; with them 29 + 2 cannot either
    for layers, weights in ((30, {}), (29, {"account_for_embedding": True, "account_for_loss": True})):
        with pytest.raises(InputError) as err:
            scenario_from_dict(scenario(layers, 16, **weights))
        assert err.value.field == "parallel.pp"
        assert "model.layers + account_for_embedding + account_for_loss" in err.value.allowed
