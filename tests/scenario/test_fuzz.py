"""Random scenario dictionaries: the loader raises InputError or returns a Scenario, nothing else."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.errors import InputError
from clustersim.scenario import DEFAULT_SCENARIO_YAML, Scenario, apply_overrides, scenario_from_dict

BASE: dict[str, Any] = yaml.safe_load(DEFAULT_SCENARIO_YAML)
FIELD_ROOTS = {"scenario", "name", "model", "cluster", "parallel", "training"}

SECTION_KEYS = {
    "model": ["preset", "hf_config", "name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act",
              "vocab", "seq_len", "moe", "tie_embeddings"],
    "cluster": ["preset", "nodes", "gpu", "gpus_per_node", "scale_up", "scale_out", "nics_per_node", "pcie",
                "nodes_per_leaf", "oversubscription"],
    "parallel": ["tp", "pp", "dp", "cp", "ep", "sequence_parallel", "zero_stage", "micro_batch", "global_batch",
                 "schedule", "virtual_stages", "recompute", "overlap_grad_reduce", "overlap_param_gather",
                 "tp_comm_overlap", "dp_bucket_params"],
    "training": ["dtype", "optimizer"],
}

names = st.sampled_from(
    ["llama3-8b", "llama3-70b", "gpt3-175b", "dgx-h100", "dgx-a100", "hgx-h200", "h100-sxm-80gb", "nvswitch",
     "bf16", "fp8", "1f1b", "gpipe", "interleaved-1f1b", "full", "selective", "swiglu", "gelu", "adam", "", "x",
     "/nonexistent/config.json", "/", ".", "../..", "\x00", "nan", "1e400"])
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-3, 70), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 2, 4, 8, 16, 32, 64, 128]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), names,
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), names), inner, max_size=3)), max_leaves=8)
keys = st.one_of(st.sampled_from([k for ks in SECTION_KEYS.values() for k in ks] + list(SECTION_KEYS) + ["name"]),
                 st.text(max_size=8), st.integers(-2, 2), st.none(), st.booleans())


def _check(data: Any) -> None:
    try:
        result = scenario_from_dict(data)
    except InputError as exc:
        assert exc.field and exc.allowed
        assert str(exc).startswith(f"{exc.field}: got ")
        # the field is a scenario key (or the whole scenario / a section), never a profile-internal name
        if not exc.allowed.startswith(("unknown key", "Keys should be strings")):  # else: the user's own key
            assert exc.field.split(".")[0].split(" ")[0] in FIELD_ROOTS, exc.field
        return
    assert isinstance(result, Scenario)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(sorted(SECTION_KEYS)), keys, values), min_size=1, max_size=4))
def test_mutated_default_scenario(edits: list[tuple[str, Any, Any]]) -> None:
    data = copy.deepcopy(BASE)
    for section, key, value in edits:
        target = data.setdefault(section, {})
        if isinstance(target, dict):
            target[key] = value
    _check(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(section=st.sampled_from(sorted(SECTION_KEYS)), value=values)
def test_whole_section_replaced(section: str, value: Any) -> None:
    data = copy.deepcopy(BASE)
    data[section] = value
    _check(data)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(values, st.dictionaries(keys, values, max_size=5)))
def test_arbitrary_structures(data: Any) -> None:
    _check(data)


@settings(max_examples=200, deadline=None)
@given(assignments=st.lists(st.text(max_size=30), max_size=3))
def test_random_set_overrides(assignments: list[str]) -> None:
    try:
        data = apply_overrides(BASE, assignments)
    except InputError:
        return
    _check(data)


@settings(max_examples=150, deadline=None)
@given(cfg=st.dictionaries(st.sampled_from(["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
                                            "max_position_embeddings", "num_key_value_heads", "intermediate_size",
                                            "hidden_act", "num_local_experts", "num_experts_per_tok",
                                            "tie_word_embeddings", "n_layer"]), values, max_size=8))
def test_random_hf_config(cfg: dict[str, Any]) -> None:
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/config.json"
        with open(path, "w") as f:
            json.dump(cfg, f, default=str)
        data = copy.deepcopy(BASE)
        data["model"] = {"hf_config": path}
        _check(data)
