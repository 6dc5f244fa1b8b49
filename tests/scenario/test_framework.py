"""`framework:` and `parallel.fsdp` (docs/scenario.md): defaults resolved from the
framework data file, explicit fields overriding them, and bad values named with what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from clustersim.errors import InputError
from clustersim.frameworks import FrameworkSpec, framework_names, load_framework
from clustersim.scenario import DEFAULT_SCENARIO_YAML, scenario_from_dict

BASE: dict[str, Any] = yaml.safe_load(DEFAULT_SCENARIO_YAML)  # 16 H100, tp2 pp2 dp4


def build(framework: str | None = None, training: dict | None = None, parallel: dict | None = None):
    data = copy.deepcopy(BASE)
    if framework is not None:
        data["framework"] = framework
    data.setdefault("training", {}).update(training or {})
    data["parallel"].update(parallel or {})
    return scenario_from_dict(data)


def test_every_framework_loads_with_every_field():
    assert framework_names() == ("megatron-core", "megatron-legacy", "torchtitan", "deepspeed", "deepspeed-bf16")
    for name in framework_names():
        spec = load_framework(name)
        assert isinstance(spec, FrameworkSpec) and spec.name == name and spec.description


def test_default_is_megatron_core_and_auto_attention_follows_the_framework():
    assert build().framework.name == "megatron-core"
    assert build().training.attention == "flash"
    assert build("megatron-legacy").training.attention == "standard"
    assert build("torchtitan", parallel={"zero_stage": 0}).training.attention == "flash"
    # an explicit field overrides the framework's default
    assert build("megatron-legacy", training={"attention": "flash"}).training.attention == "flash"
    assert build("torchtitan", training={"attention": "standard"}, parallel={"zero_stage": 0}).training.attention == "standard"


def test_unknown_framework_names_the_allowed_ones():
    with pytest.raises(InputError) as info:
        build("jax-maxtext")
    assert info.value.field == "framework"
    assert "megatron-core" in info.value.allowed and "deepspeed" in info.value.allowed


def test_fsdp_section_resolves_into_the_layout():
    par = build("torchtitan", parallel={"zero_stage": 3, "fsdp": {"version": 2, "prefetch": 2,
                                                                  "reshard_after_forward": False,
                                                                  "hsdp_replicas": 2}}).parallel
    assert (par.fsdp_version, par.fsdp_prefetch, par.reshard_after_forward, par.hsdp_replicas) == (2, 2, False, 2)
    par = build(parallel={"zero_stage": 3}).parallel
    assert (par.fsdp_version, par.fsdp_prefetch, par.reshard_after_forward, par.hsdp_replicas) == (0, 1, None, 1)  # None: the framework decides


@pytest.mark.parametrize("fsdp, zero, field", [
    ({"version": 3}, 3, "parallel.fsdp.version"),
    ({"prefetch": -1}, 3, "parallel.fsdp.prefetch"),
    ({"hsdp_replicas": 3}, 3, "parallel.fsdp.hsdp_replicas"),   # dp = 4
    ({"hsdp_replicas": 0}, 3, "parallel.fsdp.hsdp_replicas"),
    ({"reshard": True}, 3, "parallel.fsdp.reshard"),
    ({"version": 2}, 1, "parallel.fsdp"),                         # FSDP is ZeRO-3
])
def test_bad_fsdp_values_name_the_field(fsdp, zero, field):
    with pytest.raises(InputError) as info:
        build(parallel={"zero_stage": zero, "fsdp": fsdp})
    assert info.value.field == field
