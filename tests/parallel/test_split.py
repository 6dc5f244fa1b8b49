"""The frameworks' pipeline splits (clustersim.parallel.split): hand-worked Megatron-Core and
torchtitan cases, properties, and bad input."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import InputError
from clustersim.parallel.split import (
    framework_split,
    layout_counts,
    parse_layout,
    uneven_counts,
    weighted_counts,
)


def layout(**kw) -> SimpleNamespace:
    base = dict(pp=1, virtual_stages=1, schedule="1f1b", layers_per_stage=(), first_stage_layers=0,
                last_stage_layers=0, account_for_embedding=0, account_for_loss=0, pipeline_layout="")
    base.update(kw)
    if base["virtual_stages"] > 1:
        base["schedule"] = "interleaved-1f1b"
    return SimpleNamespace(**base)


# --- Megatron-Core, hand-worked from its own unit tests ----------------------------------------
# tests/unit_tests/transformer/test_transformer_block.py TestPipelineParallelTransformerBlock
# .test_layer_builder (Megatron-LM d98e8a64d, 2026-08): (layers, pp, vpp, embedding, loss, first,
# last) the rows that build, with the counts get_num_layers_to_build gives (transformer_block.py
# lines 103-202: first/last as given, the middle (layers - first - last) / middle ranks, each rank's
# share / vpp per chunk; with the embedding/loss counted, (layers + e + l) / pp per rank, / vpp per
# chunk, one fewer on the first chunk of rank 0 and on the last chunk of the last rank).

@pytest.mark.parametrize("layers, pp, vpp, emb, loss, first, last, expected", [
    (60, 5, 1, 0, 0, 0, 4, (14, 14, 14, 14, 4)),                  # "Last pipeline stage has specified layers"
    (60, 8, 1, 0, 0, 6, 6, (6, 8, 8, 8, 8, 8, 8, 6)),             # "Uneven PP 6*[8]+[6]+[6]=60"
    (60, 6, 1, 0, 0, 5, 0, (5, 11, 11, 11, 11, 11)),              # "First pipeline stage has specified layers"
    (63, 4, 1, 1, 0, 0, 0, (15, 16, 16, 16)),                     # embedding in the split
    (63, 4, 1, 0, 1, 0, 0, (16, 16, 16, 15)),                     # loss in the split
    (62, 4, 1, 1, 1, 0, 0, (15, 16, 16, 15)),                     # both
    (62, 4, 2, 1, 1, 0, 0, (7, 8, 8, 8, 8, 8, 8, 7)),             # both, with virtual stages
])
def test_megatron_layer_builder_rows(layers, pp, vpp, emb, loss, first, last, expected) -> None:
    lay = layout(pp=pp, virtual_stages=vpp, account_for_embedding=emb, account_for_loss=loss,
                 first_stage_layers=first, last_stage_layers=last)
    assert framework_split(lay, layers) == expected
    assert sum(expected) == layers


# tests/unit_tests/transformer/test_transformer_layer.py test_get_layer_offset_parametrized: pp 4,
# vpp 2, offsets per (pp rank, vp stage); the counts are the differences of the offsets, in our
# stage order chunk * pp + rank.
@pytest.mark.parametrize("layers, first, last, expected", [
    (30, 8, 10, (4, 3, 3, 5, 4, 3, 3, 5)),     # "30 layers: 8+6+6+10": (0,0) 0-3, (1,0) 4-6, (2,0) 7-9, (3,0) 10-14 ...
    (26, 8, 0, (4, 3, 3, 3, 4, 3, 3, 3)),      # "26 layers: 8+6+6+6"
    (26, 0, 8, (3, 3, 3, 4, 3, 3, 3, 4)),      # "26 layers: 6+6+6+8"
])
def test_megatron_layer_offsets_interleaved(layers, first, last, expected) -> None:
    assert uneven_counts(layers, 4, 2, first, last) == expected
    assert framework_split(layout(pp=4, virtual_stages=2, first_stage_layers=first, last_stage_layers=last),
                           layers) == expected


@pytest.mark.parametrize("layers, pp, vpp, emb, loss, first, last, field", [
    (101, 8, 1, 0, 0, 13, 13, "parallel.first_stage_layers"),   # 75 middle layers over 6 ranks
    (61, 4, 1, 0, 0, 12, 0, "parallel.first_stage_layers"),     # 49 over 3
    (60, 6, 1, 1, 0, 5, 5, "parallel.first_stage_layers"),      # uneven PP with the embedding counted
    (30, 4, 2, 0, 0, 7, 0, "parallel.first_stage_layers"),      # 7 layers do not split over 2 chunks
    (30, 4, 2, 0, 0, 0, 9, "parallel.last_stage_layers"),
    (32, 1, 1, 0, 0, 4, 0, "parallel.first_stage_layers"),      # pp = 1
    (20, 2, 1, 0, 0, 8, 8, "parallel.first_stage_layers"),      # pp = 2: first + last must be all layers
    (16, 4, 1, 0, 0, 8, 8, "parallel.first_stage_layers"),      # no layers left for the middle ranks
])
def test_megatron_refusals_name_the_field(layers, pp, vpp, emb, loss, first, last, field) -> None:
    lay = layout(pp=pp, virtual_stages=vpp, account_for_embedding=emb, account_for_loss=loss,
                 first_stage_layers=first, last_stage_layers=last)
    with pytest.raises(InputError) as err:
        framework_split(lay, layers)
    assert err.value.field == field and err.value.allowed


def test_where_megatron_refuses_the_weighted_split_follows_torchtitan() -> None:
    # "num_layers not divisible by pipeline size with embedding/loss" (65, 4): Megatron-Core raises;
    # clustersim gives torchtitan's split of 67 effective layers: 17, 17, 17, 16, then -1 at both ends
    assert weighted_counts(65, 4, 1, 1) == (16, 17, 17, 15)


# --- torchtitan (torchtitan/distributed/pipeline_parallel.py _generate_llm_fqn_per_model_part) --

def test_torchtitan_docstring_example() -> None:
    # "_generate_llm_fqn_per_model_part(2, 3, input_weight=2, output_weight=2)": 7 effective layers over
    # 2 stages: 4 and 3; stage 0 keeps 4 - 2 = 2 blocks, stage 1 keeps 3 - 2 = 1
    assert weighted_counts(3, 2, 2, 2) == (2, 1)


def test_torchtitan_default_weights_llama3_8b_pp4() -> None:
    # 32 layers + 1 + 1 = 34 over 4 stages: 9, 9, 8, 8 (extras to the first stages), then -1 at the ends
    assert weighted_counts(32, 4, 1, 1) == (8, 9, 8, 7)
    # and over 8 stages (interleaved, 2 per rank): 34 = 4 x 8 + 2 -> 5, 5, 4 ... 4
    assert weighted_counts(32, 8, 1, 1) == (4, 5, 4, 4, 4, 4, 4, 3)


def test_weights_larger_than_the_first_share_are_refused() -> None:
    with pytest.raises(InputError) as err:
        weighted_counts(8, 4, 5, 0)          # 13 over 4: the first share is 4 < 5
    assert err.value.field == "parallel.account_for_embedding"
    with pytest.raises(InputError) as err:
        weighted_counts(4, 8, 1, 1)          # 6 effective layers on 8 stages
    assert err.value.field == "parallel.pp"


def test_a_weight_above_the_least_share_is_refused_as_torchtitan_does() -> None:
    # torchtitan's balance check (_generate_llm_fqn_per_model_part): 32 layers + 3 + 0 = 35 over 12
    # stages is 2 each and 3 on the first 11; input_weight 3 exceeds the least share, 2, and torchtitan
    # raises "input_weight (3) exceeds minimum layers per stage (2)" (it was split [0, 3, ..., 2])
    with pytest.raises(InputError) as err:
        weighted_counts(32, 12, 3, 0)
    assert err.value.field == "parallel.account_for_embedding" and err.value.value == 3
    assert "least layers per stage of the split (2" in str(err.value)
    with pytest.raises(InputError) as err:
        weighted_counts(32, 12, 0, 3)
    assert err.value.field == "parallel.account_for_loss"
    assert weighted_counts(32, 12, 2, 0)[0] == 1      # at the least share: accepted (3 - 2)
    assert weighted_counts(5, 1, 9, 9) == (5,)        # one stage holds everything (no check, as torchtitan)


# --- Megatron-Core layout strings -----------------------------------------------------------------

def test_parse_layout_megatron_examples() -> None:
    # pipeline_parallel_layer_layout.py parse_str_to_list docstring: "Ettt|(tt|)*29,m|L" ->
    # [["E","t","t","t"]] + [["t","t"]] * 29 + [["m"], ["L"]]
    assert parse_layout("Ettt|(tt|)*29,m|L") == ("Ettt",) + ("tt",) * 29 + ("m", "L")
    # the same with the repeat inside: "Et*3|(tt|)*29,m|L" (transformer_config.py docstring)
    assert parse_layout("Et*3|(tt|)*29,m|L") == parse_layout("Ettt|(tt|)*29,m|L")
    # Megatron-Bridge's Llama-3 70B layout on PP8 x VP5 (NVIDIA-NeMo/Megatron-Bridge pull 5391)
    counts = layout_counts("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", 80, 0, 8, 40)
    assert counts == (2,) * 35 + (3, 2, 2, 2, 1) and sum(counts) == 80


def test_layout_deepseek_v3_with_mtp() -> None:
    # Megatron-Bridge DeepSeek-V3 PP8 x VP4: "Et|(tt|)*30mL" (61 layers, one MTP module with the loss)
    assert layout_counts("Et|(tt|)*30mL", 61, 1, 8, 32) == (1,) + (2,) * 30 + (0,)


def test_layout_with_empty_stages_beyond_the_layers() -> None:
    # 30 layers on PP8 x VP4 = 32 stages: more stages than layers, an empty stage before the loss
    lay = layout(pp=8, virtual_stages=4, pipeline_layout="Et|(t|)*29|L")
    counts = framework_split(lay, 30)
    assert counts == (1,) * 30 + (0, 0) and len(counts) == 32


@pytest.mark.parametrize("text, layers, mtp, stages, needle", [
    ("Et|tt|L", 4, 0, 3, "decoder layers"),            # 3 t for 4 layers
    ("Et|tt|tL", 4, 0, 4, "4 stages"),
    ("t|Ett|tL", 4, 0, 3, "embedding"),
    ("Et|ttL|t", 4, 0, 3, "loss"),
    ("Et|tm|tL", 3, 1, 3, "MTP"),                       # MTP away from the loss stage
    ("Et|tx|tL", 3, 0, 3, "stages separated"),
    ("Et|(t|)*999999999|L", 3, 0, 3, "at most"),       # hostile repeat
    ("E(t|L", 1, 0, 2, "stages separated"),
    ("", 1, 0, 1, "stages separated"),
])
def test_bad_layouts_are_named(text, layers, mtp, stages, needle) -> None:
    with pytest.raises(InputError) as err:
        layout_counts(text, layers, mtp, 1, stages)
    assert err.value.field == "parallel.pipeline_layout" and needle in err.value.allowed


def test_combinations_megatron_refuses() -> None:
    for kw, field in ((dict(pipeline_layout="Et|tL", account_for_loss=1), "parallel.pipeline_layout"),
                      (dict(first_stage_layers=1, account_for_embedding=1), "parallel.first_stage_layers"),
                      (dict(account_for_loss=1, layers_per_stage=(1, 1)), "parallel.layers_per_stage")):
        with pytest.raises(InputError) as err:
            framework_split(layout(pp=2, **kw), 2)
        assert err.value.field == field


def test_v_schedules_refuse_rank_order_settings_but_take_weights() -> None:
    with pytest.raises(InputError) as err:
        framework_split(layout(pp=4, schedule="zb-v", first_stage_layers=2), 16)
    assert err.value.field == "parallel.first_stage_layers" and "zb-v" in err.value.allowed
    # ZB-V: 8 model stages in path order; torchtitan weighs the first and the last (both on rank 0)
    assert framework_split(layout(pp=4, schedule="zb-v", account_for_embedding=1, account_for_loss=1), 16) == \
        (2, 3, 2, 2, 2, 2, 2, 1)


def test_a_rank_needs_a_layer_the_embedding_or_the_loss() -> None:
    # ranks holding only the embedding (rank 0) or only the loss (rank 2) are kept
    assert framework_split(layout(pp=3, pipeline_layout="E|tttt|L"), 4) == (0, 4, 0)
    # a rank holding nothing at all is refused
    with pytest.raises(InputError) as err:
        framework_split(layout(pp=4, pipeline_layout="Ett||tt|L"), 4)
    assert err.value.field == "parallel.pipeline_layout" and "rank 1 would hold nothing" in err.value.allowed


# --- properties ------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(layers=st.integers(1, 200), pp=st.integers(1, 16), v=st.integers(1, 4), emb=st.integers(0, 3),
       loss=st.integers(0, 3))
def test_weighted_split_properties(layers, pp, v, emb, loss) -> None:
    lay = layout(pp=pp, virtual_stages=v if pp > 1 else 1, account_for_embedding=emb, account_for_loss=loss)
    stages = pp * lay.virtual_stages
    try:
        counts = framework_split(lay, layers)
    except InputError as exc:
        assert exc.field in ("parallel.pp", "parallel.virtual_stages", "parallel.account_for_embedding",
                             "parallel.account_for_loss")
        return
    assert len(counts) == stages and sum(counts) == layers and min(counts) >= 0
    # with the embedding and loss put back, no two stages differ by more than one effective layer
    effective = list(counts)
    effective[0] += emb
    effective[-1] += loss
    assert max(effective) - min(effective) <= 1
    # every rank holds a layer, or the embedding (rank 0) or the loss (rank pp - 1)
    assert all(sum(counts[c * pp + r] for c in range(lay.virtual_stages)) >= 1 for r in range(1, pp - 1))


@settings(max_examples=300, deadline=None)
@given(layers=st.integers(1, 200), pp=st.integers(2, 16), v=st.integers(1, 4), first=st.integers(0, 40),
       last=st.integers(0, 40))
def test_uneven_split_properties(layers, pp, v, first, last) -> None:
    if not (first or last):
        return
    lay = layout(pp=pp, virtual_stages=v, first_stage_layers=first, last_stage_layers=last)
    try:
        counts = framework_split(lay, layers)
    except InputError as exc:
        assert exc.field in ("parallel.first_stage_layers", "parallel.last_stage_layers")
        return
    assert len(counts) == pp * v and sum(counts) == layers          # every layer once
    rank = [sum(counts[c * pp + r] for c in range(v)) for r in range(pp)]
    if first:
        assert rank[0] == first
    if last:
        assert rank[-1] == last
    middle = rank[1 if first else 0:pp - 1 if last else pp]
    assert len(set(middle)) <= 1                                  # the rest split evenly
    assert all(len({counts[c * pp + r] for c in range(v)}) == 1 for r in range(pp))   # evenly over chunks


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=24), st.sampled_from([1, 2, 4]))
def test_layout_counts_round_trip(counts, pp) -> None:
    if len(counts) % pp:
        return
    stages = ["t" * n for n in counts]
    stages[0] = "E" + stages[0]
    stages[-1] += "L"
    assert layout_counts("|".join(stages), sum(counts), 0, pp, len(counts)) == tuple(counts)


@pytest.mark.parametrize("schedule", ["zb-v", "dualpipe-v"])
def test_a_v_schedule_takes_one_count_per_model_stage_and_simulates_it(schedule):
    """A V schedule's explicit split: pp counts were accepted, printed and not simulated (the step
    and the memory verdict were the even split's: 'fits' for a layout whose last stage needs
    120 GiB); now it takes 2 x pp counts in model order, and an uneven one moves memory and time."""
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict
    base = {"model": {"preset": "llama3-8b", "seq_len": 4096}, "cluster": {"preset": "dgx-h100", "nodes": 1},
            "parallel": {"tp": 1, "pp": 8, "dp": 1, "micro_batch": 1, "global_batch": 64, "schedule": schedule}}

    def with_split(counts):
        return scenario_from_dict({**base, "parallel": {**base["parallel"], "layers_per_stage": counts}})

    with pytest.raises(InputError) as exc:
        with_split([1, 1, 1, 1, 1, 1, 1, 25])
    assert exc.value.field == "parallel.layers_per_stage" and "16 counts" in str(exc.value)
    even, skewed = simulate(with_split([2] * 16)), simulate(with_split([3] + [2] * 14 + [1]))
    plain = simulate(scenario_from_dict(base))
    assert even.step_time_s == plain.step_time_s
    assert skewed.step_time_s != even.step_time_s
    assert skewed.memory_by_stage[0].allocated_peak_bytes > even.memory_by_stage[0].allocated_peak_bytes
