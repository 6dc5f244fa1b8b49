"""Bad MoE / schedule input through `clustersim run`: exit 2 with the field named, no traceback
(docs/moe.md): top_k > experts, EP not dividing the experts, DualPipe on an odd number of
stages, a capacity factor <= 0."""

from __future__ import annotations

import pytest

from clustersim.cli import main

# a 4-layer Mixtral-shaped model on 2 DGX H100 (16 GPUs): small enough to build in milliseconds
BASE = ["model.preset=mixtral-8x22b", "model.layers=4", "cluster.preset=dgx-h100", "cluster.nodes=2",
        "parallel.tp=1", "parallel.sequence_parallel=false"]


@pytest.mark.parametrize("overrides,field", [
    (["model.moe={experts: 8, top_k: 9}", "parallel.pp=1", "parallel.dp=16", "parallel.ep=8"], "model.moe.top_k"),
    (["parallel.pp=1", "parallel.dp=16", "parallel.ep=16"], "parallel.ep"),
    (["parallel.pp=1", "parallel.dp=16", "parallel.ep=3"], "parallel.ep"),
    (["model.moe={experts: 8, top_k: 2, capacity_factor: 0}", "parallel.pp=1", "parallel.dp=16"],
     "model.moe.capacity_factor"),
    (["model.moe={experts: 8, top_k: 2, capacity_factor: -1.5}", "parallel.pp=1", "parallel.dp=16"],
     "model.moe.capacity_factor"),
    # an expert TP that breaks the folding or the expert width is named, not parallel.ep (it was)
    (["parallel.pp=1", "parallel.dp=16", "parallel.ep=8", "parallel.expert_tp=3"], "parallel.expert_tp"),
    (["parallel.pp=1", "parallel.dp=16", "parallel.ep=8", "parallel.expert_tp=4"], "parallel.expert_tp"),
    (["model.moe={experts: 8, top_k: 2, pad_to_capacity: true}", "parallel.pp=1", "parallel.dp=16"],
     "model.moe.pad_to_capacity"),
])
def test_bad_moe_input_exits_2_naming_the_field(overrides, field, capsys):
    _exits_2_naming(BASE + overrides, field, capsys)


# the layouts Megatron-Core's TransformerConfig refuses with --overlap-moe-expert-parallel-comm
# (pp > 1 without virtual stages, full recompute, MTP > 1, fp32): accepted and priced before
OVERLAP = ["parallel.overlap_moe_expert_parallel_comm=true", "parallel.ep=8"]


@pytest.mark.parametrize("overrides", [
    ["parallel.pp=2", "parallel.dp=8", "parallel.schedule=1f1b"],
    ["parallel.pp=1", "parallel.dp=16", "parallel.recompute=full"],
    ["parallel.pp=1", "parallel.dp=16", "model.mtp_layers=2"],
    ["parallel.pp=1", "parallel.dp=16", "training.dtype=fp32"],
])
def test_ep_overlap_on_a_layout_megatron_refuses_exits_2(overrides, capsys):
    err = _exits_2_naming(BASE + OVERLAP + overrides, "parallel.overlap_moe_expert_parallel_comm", capsys)
    assert "Megatron-Core" in err


def test_ep_overlap_where_megatron_runs_it_is_accepted(capsys):
    args = ["run"]
    for o in BASE + OVERLAP + ["parallel.pp=2", "parallel.dp=8", "parallel.schedule=interleaved-1f1b",
                               "parallel.virtual_stages=2", "parallel.global_batch=32"]:
        args += ["--set", o]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0, capsys.readouterr().err
def _exits_2_naming(overrides, field, capsys):
    args = ["run"]
    for o in overrides:
        args += ["--set", o]
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert field in err and "Traceback" not in err, err
    return err


def test_dualpipe_on_an_odd_number_of_stages_names_parallel_pp(capsys):
    # 3 pipeline stages x 8 data-parallel ranks on 3 nodes (24 GPUs): DualPipe pairs stages r and pp-1-r
    args = ["run"]
    for o in ["model.preset=mixtral-8x22b", "model.layers=6", "cluster.preset=dgx-h100", "cluster.nodes=3",
              "parallel.tp=1", "parallel.sequence_parallel=false", "parallel.pp=3", "parallel.dp=8",
              "parallel.ep=8", "parallel.schedule=dualpipe", "parallel.global_batch=48"]:
        args += ["--set", o]
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "parallel.pp" in err and "even" in err, err
