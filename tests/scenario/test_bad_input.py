"""Bad input (docs/hostile-input.md): each mistake is an InputError naming the field and what is allowed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustersim.errors import InputError
from clustersim.scenario import DEFAULT_SCENARIO_YAML, load_scenario, scenario_from_dict

BASE: dict[str, Any] = yaml.safe_load(DEFAULT_SCENARIO_YAML)  # llama3-8b, 2 x 8 H100, tp2 pp2 dp4, gb 64


def _with(**sections: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for name, fields in sections.items():
        if name == "model":
            data["model"] = fields
        else:
            data.setdefault(name, {}).update(fields)
    return data


def _error(data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as exc:
        scenario_from_dict(data)
    return exc.value


def test_default_scenario_is_valid() -> None:
    s = scenario_from_dict(copy.deepcopy(BASE))
    assert (s.parallel.tp, s.parallel.pp, s.parallel.dp) == (2, 2, 4)


def test_product_not_matching_gpu_count_prints_every_factor() -> None:
    err = _error(_with(parallel={"dp": 2}))
    assert err.field == "parallel"
    assert str(err) == ("parallel: got 'tp(2) * pp(2) * cp(1) * dp(2) = 8'; allowed: a product equal to the GPU count: "
                        "cluster.nodes(2) * gpus_per_node(8) = 16")


def test_dp_left_out_must_divide() -> None:
    err = _error(_with(parallel={"tp": 3, "dp": None}))
    assert err.field == "parallel" and "divisor of the GPU count 16" in err.allowed


def test_heads_not_divisible_by_tp() -> None:
    # gpt-style explicit model: 12 heads (hidden 768 = 12 * 64) with tp 8 on one node
    model = {"layers": 12, "hidden": 768, "heads": 12, "ffn_hidden": 3072, "vocab": 50257, "seq_len": 1024}
    err = _error(_with(model=model, cluster={"nodes": 1}, parallel={"tp": 8, "pp": 1, "dp": 1, "global_batch": 8}))
    assert err.field == "parallel.tp" and err.value == 8
    assert "a divisor of model.heads (12)" in err.allowed


def test_layers_fewer_than_pp() -> None:
    err = _error(_with(model={"preset": "llama3-8b", "layers": 3}, parallel={"tp": 1, "pp": 4, "dp": 4}))
    assert err.field == "parallel.pp" and err.value == 4
    assert "model.layers (3)" in err.allowed


def test_micro_batch_not_dividing_per_replica_batch() -> None:
    # per-replica batch 64 / 4 = 16; micro-batch 3 does not divide it
    err = _error(_with(parallel={"micro_batch": 3}))
    assert err.field == "parallel.micro_batch" and err.value == 3
    assert "global_batch/dp = 64/4 = 16" in err.allowed


@pytest.mark.parametrize(("section", "key"), [("parallel", "tensor_parallel"), ("model", "layerz"),
                                              ("cluster", "node"), ("training", "lr")])
def test_unknown_key_lists_allowed_keys(section: str, key: str) -> None:
    data = copy.deepcopy(BASE)
    data[section] = {**data.get(section, {}), key: 1}
    err = _error(data)
    assert err.field == f"{section}.{key}"
    assert "unknown key; allowed keys:" in err.allowed
    allowed_example = {"parallel": "tp", "model": "layers", "cluster": "nodes", "training": "dtype"}[section]
    assert allowed_example in err.allowed.split("allowed keys: ")[1].split(", ")


def test_unknown_top_level_key() -> None:
    data = copy.deepcopy(BASE)
    data["paralell"] = {"tp": 2}
    err = _error(data)
    assert err.field == "paralell" and "parallel" in err.allowed


@pytest.mark.parametrize(("section", "key", "bound"), [
    ("parallel", "tp", "1"), ("parallel", "micro_batch", "1"), ("parallel", "global_batch", "1"),
    ("parallel", "dp_bucket_params", "0"), ("cluster", "nodes", "1"), ("cluster", "oversubscription", "1.0"),
    ("model", "hidden", "1"), ("model", "layers", "1"),
])
def test_negative_number(section: str, key: str, bound: str) -> None:
    data = copy.deepcopy(BASE)
    if section == "model":
        data["model"] = {"preset": "llama3-8b", key: -4}
    else:
        data[section][key] = -4
    err = _error(data)
    assert err.field == f"{section}.{key}" and err.value == -4
    assert err.allowed == f"a number >= {bound}"


def test_bad_choice_names_allowed_values() -> None:
    err = _error(_with(parallel={"schedule": "zero-bubble"}))
    assert err.field == "parallel.schedule"
    assert "gpipe" in err.allowed and "interleaved-1f1b" in err.allowed


def test_unknown_hardware_names_scenario_field() -> None:
    err = _error(_with(cluster={"gpu": "b300"}))
    assert err.field == "cluster.gpu" and "h100-sxm-80gb" in err.allowed
    err = _error(_with(cluster={"scale_out": "ib-fdr"}))
    assert err.field == "cluster.scale_out" and "ib-ndr" in err.allowed


def test_interleaved_needs_micro_batches_multiple_of_pp() -> None:
    # tp2 pp2 dp4, gb 4*1*3 = 12: 3 micro-batches per pipeline, not a multiple of pp = 2
    err = _error(_with(parallel={"schedule": "interleaved-1f1b", "virtual_stages": 2, "global_batch": 12}))
    assert err.field == "parallel.global_batch" and "multiple of pp (2)" in err.allowed


# --- through load_scenario (files and --set overrides) --------------------------------------

def test_load_scenario_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="SCENARIO"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {preset: llama3-8b\n")
    with pytest.raises(InputError, match="well-formed YAML"):
        load_scenario(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="YAML mapping"):
        load_scenario(bad)
    good = tmp_path / "good.yaml"
    good.write_text(DEFAULT_SCENARIO_YAML)
    assert load_scenario(good).parallel.dp == 4
    with pytest.raises(InputError) as exc:
        load_scenario(good, ["parallel.tp=-1"])
    assert exc.value.field == "parallel.tp"
    with pytest.raises(InputError) as exc:
        load_scenario(good, ["parallel.tp"])
    assert exc.value.field == "--set"


@pytest.mark.parametrize("content", [
    "5", "[1, 2]", '["num_hidden_layers"]', "NaN",
    json.dumps({"num_hidden_layers": "abc", "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 1000,
                "max_position_embeddings": 4096}),
    json.dumps({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 0, "vocab_size": 1000,
                "max_position_embeddings": 4096}),
    json.dumps({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 1000,
                "max_position_embeddings": 4096, "num_local_experts": "eight"}),
    json.dumps({"num_hidden_layers": 32}),
])
def test_bad_hf_config(tmp_path: Path, content: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(content)
    err = _error(_with(model={"hf_config": str(cfg)}))
    assert err.field.startswith("model.hf_config")


def test_undecodable_hf_config(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_bytes(b"\xff\xfe\x00")
    assert _error(_with(model={"hf_config": str(cfg)})).field == "model.hf_config"


@pytest.mark.parametrize("parallel,field,allowed", [
    ({"recompute_every": 0}, "parallel.recompute_every", "from 1 to model.layers (32)"),
    ({"recompute_every": 33}, "parallel.recompute_every", "from 1 to model.layers (32)"),
    ({"recompute": "full", "recompute_method": "block", "recompute_num_layers": 17},
     "parallel.recompute_num_layers", "layers of a pipeline stage (16"),
    ({"recompute": "full", "recompute_num_layers": 0}, "parallel.recompute_num_layers", "from 1"),
    ({"recompute_method": "uniform"}, "parallel.recompute_method", "recompute: full"),
    ({"recompute": "selective-layer"}, "parallel.recompute", "selective-op"),
    ({"recompute": "full", "recompute_method": "blocks"}, "parallel.recompute_method", "uniform"),
])
def test_recompute_fields_name_what_is_allowed(parallel: dict[str, Any], field: str, allowed: str) -> None:
    err = _error(_with(parallel=parallel))      # llama3-8b (32 layers) on pp 2: 16 layers per stage
    assert err.field == field and allowed in err.allowed


def test_recompute_fields_reach_the_layout() -> None:
    s = scenario_from_dict(_with(parallel={"recompute": "full", "recompute_method": "block",
                                           "recompute_num_layers": 4, "recompute_every": 8}))
    p = s.parallel
    assert (p.recompute, p.recompute_method, p.recompute_num_layers, p.recompute_every) == ("full", "block", 4, 8)


def test_unknown_framework_names_the_frameworks() -> None:
    data = copy.deepcopy(BASE)
    data["framework"] = "megatron"
    err = _error(data)
    assert err.field == "framework" and "torchtitan" in err.allowed and "megatron-core" in err.allowed


@pytest.mark.parametrize("section, fields, field", [
    ("model", {"preset": "llama3-8b", "layers": True}, "model.layers"),
    ("parallel", {"tp": True}, "parallel.tp"),
    ("parallel", {"zero_stage": True}, "parallel.zero_stage"),
    ("cluster", {"nodes": True}, "cluster.nodes"),
    ("goodput", {"trials": True}, "goodput.trials"),
])
def test_true_or_false_is_not_a_number(section: str, fields: dict[str, Any], field: str) -> None:
    """pydantic's lax mode read true as 1 (``layers: true`` ran a 1.3B model); fields whose type
    names bool (parallel.account_for_embedding: true or a count) still take it."""
    err = _error(_with(**{section: fields}))
    assert err.field == field and "not true or false" in str(err), err
    scenario_from_dict(_with(parallel={"account_for_embedding": True}))


def test_set_reaches_a_node_group_by_its_index() -> None:
    """A mixed cluster's refusal of cluster.nodes says "set it per group: cluster.groups.N.KEY",
    and --set refused that very key (groups is a list, not a section)."""
    path = str(Path(__file__).resolve().parents[2] / "scenarios" / "llama3_70b_a100_h100_mixed.yaml")
    with pytest.raises(InputError, match=r"cluster\.groups\.N\.KEY"):
        load_scenario(path, ["cluster.nodes=4"])
    sc = load_scenario(path, ["cluster.groups.0.nodes=8", "parallel.dp=null", "parallel.global_batch=192"])  # dp 6
    assert sc.cluster.num_nodes == 24 and sc.parallel.dp == 6
    with pytest.raises(InputError, match="an index from 0 to 1"):
        load_scenario(path, ["cluster.groups.2.nodes=4"])


@pytest.mark.parametrize("item", ["=4", ".tp=4", "parallel..tp=4", "parallel. =4"])
def test_set_with_an_empty_key_part_names_set(item: str) -> None:
    """These were read as a key named '' ("scenario: got 4; allowed: unknown key")."""
    with pytest.raises(InputError) as err:
        load_scenario(None, [item])
    assert err.value.field == "--set" and "no empty part" in str(err.value)


@pytest.mark.parametrize("sizes", [[-1, -2], [2, 2]])
def test_hierarchical_cp_sizes_without_a2a_p2p_are_refused(sizes) -> None:
    """Under the default cp_comm p2p the sizes were accepted and ignored, negative ones too."""
    err = _error(_with(parallel={"hierarchical_cp_sizes": sizes}))
    assert err.field == "parallel.hierarchical_cp_sizes" and "a2a+p2p" in err.allowed


def test_set_into_a_list_the_scenario_lacks_names_the_list_and_the_default_title_follows() -> None:
    """`--set cluster.groups.0.nodes=8` on a scenario without groups built {'0': ...} and was refused
    as 'a list' expected; and the embedded default kept its title '... on 2 DGX H100' on 4 nodes."""
    with pytest.raises(InputError) as err:
        load_scenario(None, ["cluster.groups.0.nodes=8"])
    assert err.value.field == "--set" and "groups is not set" in str(err.value)
    assert load_scenario(None).name == "llama3-8b on 2 DGX H100 (embedded default)"
    sc = load_scenario(None, ["cluster.nodes=4", "parallel.dp=8"])
    assert sc.name == "embedded default with --set cluster.nodes, parallel.dp"
    assert load_scenario(None, ["name=mine", "cluster.nodes=4", "parallel.dp=8"]).name == "mine"


def test_kv_heads_that_do_not_divide_the_heads_are_named_before_tp() -> None:
    """kv_heads 3 of 32 heads with tp 4 was refused as 'parallel.tp: a divisor or multiple of
    model.kv_heads (3)', blaming the layout for the model's fault."""
    err = _error(_with(model={"preset": "llama3-8b", "kv_heads": 3}, parallel={"tp": 4, "pp": 1, "dp": 4}))
    assert err.field == "model.kv_heads"


def test_a_list_of_counts_refuses_true_and_false() -> None:
    """layers_per_stage [31, true] was read as [31, 1]; scalar counts already refused booleans."""
    err = _error(_with(parallel={"layers_per_stage": [31, True]}))
    assert err.field == "parallel.layers_per_stage" and "not true or false" in str(err)


@pytest.mark.parametrize("model, field", [
    ({"preset": "llama3-8b", "moe": {"every": 2}}, "model.moe.every"),          # a dense model: nothing to space
    ({"preset": "gemma3-27b", "global_every": 1000}, "model.global_every"),      # no layer would be global
])
def test_patterns_that_change_nothing_are_refused(model, field) -> None:
    """moe.every on a dense model and a global_every beyond the layers were accepted and ignored."""
    err = _error(_with(model=model, parallel={"tp": 8, "pp": 1, "dp": 2}))
    assert err.field == field


def test_a_union_field_is_named_without_pydantics_member_tag() -> None:
    """account_for_embedding: 1.5 was named 'parallel.account_for_embedding.bool' with only the
    boolean's words; the field takes true, false or a number of layers."""
    err = _error(_with(parallel={"account_for_embedding": 1.5}))
    assert err.field == "parallel.account_for_embedding"
    assert "true or false" in err.allowed and "whole number" in err.allowed


def test_node_groups_of_two_gpu_vendors_are_refused() -> None:
    """A100 and MI300X groups were accepted: no collective library spans NVIDIA and AMD GPUs."""
    data = _with(parallel={"tp": 8, "pp": 1, "dp": 2})
    data["cluster"] = {"groups": [{"preset": "dgx-a100", "nodes": 1}, {"preset": "mi300x", "nodes": 1}]}
    err = _error(data)
    assert err.field == "cluster.groups" and "vendor" in err.allowed


def test_a_gpu_or_nic_named_twice_among_the_faults_is_refused() -> None:
    """Two speeds for one GPU were accepted and one silently taken."""
    err = _error(_with(faults={"slow_gpus": [{"rank": 3, "speed": 0.5}, {"rank": 3, "speed": 0.8}]}))
    assert err.field == "faults.slow_gpus.1.rank" and "entry 0" in err.allowed
    err = _error(_with(faults={"slow_links": [{"node": 0, "nic": 1, "speed": 0.5}, {"node": 0, "nic": 1, "speed": 0.8}]}))
    assert err.field == "faults.slow_links.1"


def test_a_group_of_another_node_size_is_named_as_such() -> None:
    """An NVL72 group beside DGX nodes said 'scale_up_domain: got 72; allowed: a divisor of the GPU
    count 128' (a count that is no job's) instead of naming the different node sizes."""
    path = str(Path(__file__).resolve().parents[2] / "scenarios" / "llama3_70b_a100_h100_mixed.yaml")
    with pytest.raises(InputError) as err:
        load_scenario(path, ["cluster.groups.1.preset=gb200-nvl72"])
    assert err.value.field == "cluster.groups" and "same GPUs per node" in err.value.allowed
