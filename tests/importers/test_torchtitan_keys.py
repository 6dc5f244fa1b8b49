"""torchtitan keys that change cost and were dropped: CPU offload and fp8 in each generation of the
job config (clustersim/importers/torchtitan.py _low_precision; docs/calibration.md, section 3)."""

import pytest

from clustersim.errors import InputError
from clustersim.importers import finish, import_text

BASE = """[model]
name = "llama3"
flavor = "8B"
{model}
[training]
{training}
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
"""


def _import(model="", training="local_batch_size = 1", cluster="dgx-h100", extra=""):
    text = BASE.format(model=model, training=training) + extra
    return finish(import_text("torchtitan-toml", text, "job.toml", cluster=cluster, nodes=1), []).scenario


def test_enable_cpu_offload_is_fsdp2_offload_of_params_and_optimizer():
    sc = _import(training="local_batch_size = 1\nenable_cpu_offload = true")
    assert sc["parallel"]["zero_stage"] == 3 and sc["parallel"]["offload"] == {"params": True, "optimizer": True}
    with pytest.raises(InputError) as exc:
        _import(training="local_batch_size = 1\nenable_cpu_offload = true", extra='data_parallel_type = "ddp"\n')
    assert exc.value.field == "training.enable_cpu_offload"


@pytest.mark.parametrize("model, training, expected", [
    ("", "batch_size = 1\nenable_fp8_linear = true", {"dtype": "fp8"}),                  # 2024-06
    ("", 'batch_size = 1\nfp8_linear = "dynamic"', {"dtype": "fp8", "fp8_recipe": "tensorwise"}),
    ("", 'batch_size = 1\nfp8_linear = "delayed"', {"dtype": "fp8", "fp8_recipe": "delayed"}),
    ("", "batch_size = 1\nenable_float8_linear = true", {"dtype": "fp8"}),
    ('converters = ["float8"]', "local_batch_size = 1", {"dtype": "fp8"}),
    ("", 'batch_size = 1\nfp8_linear = ""', {"dtype": "bf16"}),
])
def test_fp8_in_every_generation_of_the_config(model, training, expected):
    train = _import(model, training)["training"]
    assert {k: train.get(k) for k in expected} == expected


def test_mx_converter_is_mxfp8_where_the_gpu_runs_it():
    assert _import('converters = ["quantize.linear.mx"]', cluster="dgx-b200")["training"] == \
        {"dtype": "fp8", "fp8_recipe": "mxfp8"}
    with pytest.raises(InputError) as exc:
        _import('converters = ["mx"]')
    assert exc.value.field == "model.converters"


MOE_TOML = """[model]
name = "deepseek_v3"
flavor = "671B"
[training]
local_batch_size = 1
seq_len = 4096
[parallelism]
data_parallel_shard_degree = -1
expert_parallel_degree = {ep}
{extra}
"""


def _moe_import(ep=32, extra=""):
    result = import_text("torchtitan-toml", MOE_TOML.format(ep=ep, extra=extra), "job.toml", cluster="dgx-h100",
                         nodes=32, model={"preset": "deepseek-v3"})
    return finish(result, [], model="deepseek-v3")


def test_deepep_backend_is_the_flex_dispatcher():
    """expert_parallel_comm_backend = "deepep" was listed as known and never read (priced as the
    all-to-all dispatcher)."""
    from clustersim.scenario import scenario_from_dict
    sc = _moe_import(extra='expert_parallel_comm_backend = "deepep"').scenario
    assert sc["model"]["moe"] == {"token_dispatcher": "flex"}
    spec = scenario_from_dict(sc).model
    assert spec.moe_token_dispatcher == "flex" and spec.moe_experts == 256   # the preset kept under it
    assert "moe" not in _moe_import(extra='expert_parallel_comm_backend = "standard"').scenario["model"]
    quiet = _moe_import(ep=1, extra='expert_parallel_comm_backend = "deepep"')   # no effect without EP
    assert "moe" not in quiet.scenario["model"] and any("deepep" in n for n in quiet.notes)
    with pytest.raises(InputError) as exc:
        _moe_import(extra='expert_parallel_comm_backend = "nccl"')
    assert exc.value.field == "parallelism.expert_parallel_comm_backend"


@pytest.mark.parametrize(("key", "values", "minus_one"), [
    ("tensor_parallel_degree", [-3, -1, 0, 2.5, '"2"'], False),
    ("pipeline_parallel_degree", [-2, -1, 0], False),
    ("data_parallel_shard_degree", [-3, 0, 1.5], True),
])
def test_a_bad_degree_gets_one_message_per_key(key, values, minus_one):
    """tensor_parallel_degree = -3 said "an integer from -1 to ...", and -1 then "an integer >= 1":
    each key now has one allowed text, whatever the value (only the data-parallel shard takes -1)."""
    said = set()
    for v in values:
        text = (BASE.format(model="", training="local_batch_size = 1").replace("data_parallel_shard_degree = -1\n", "")
                + f"{key} = {v}\n")
        with pytest.raises(InputError) as exc:
            import_text("torchtitan-toml", text, "job.toml", cluster="dgx-h100", nodes=1)
        assert exc.value.field == f"parallelism.{key}"
        said.add(exc.value.allowed)
    (allowed,) = said
    assert allowed.startswith("an integer from 1 to ") and ("-1 (the remaining ranks)" in allowed) is minus_one
