"""torchtitan runs DDP (ZeRO 0) or FSDP2 (ZeRO 3) and nothing between: no optimizer-only or
gradient-only sharding (torchtitan/models/llama3/infra/parallelize.py apply_ddp / apply_fsdp). The
loader refuses ZeRO 1/2 under it by name, and the sweep, through the same rule
(clustersim.frameworks.framework_refusal), never offers them (it ranked zero_stage 1 first on
scenarios/llama2_13b_a100x64_torchtitan.yaml)."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.frameworks import load_framework
from clustersim.scenario import load_scenario
from clustersim.sweep.space import SearchSpace, Shape, zero_options

TT = "scenarios/llama2_13b_a100x64_torchtitan.yaml"


@pytest.mark.parametrize("stage", [1, 2])
def test_loader_refuses_zero_1_and_2_under_torchtitan(stage: int) -> None:
    with pytest.raises(InputError) as err:
        load_scenario(TT, [f"parallel.zero_stage={stage}"])
    assert err.value.field == "parallel.zero_stage" and "0 or 3 under framework torchtitan" in str(err.value)


def test_sweep_offers_only_ddp_and_fsdp2_for_torchtitan() -> None:
    space = SearchSpace(framework=load_framework("torchtitan"))
    assert zero_options(Shape(tp=1, cp=1, pp=1, dp=64), space) == [0, 3]
    assert zero_options(Shape(tp=2, cp=1, pp=4, dp=8), space) == [0, 3]


def test_fsdp2_cpu_offload_only_with_fsdp() -> None:
    with pytest.raises(InputError) as err:
        load_scenario(TT, ["parallel.zero_stage=0", "parallel.offload.optimizer=true"])
    assert err.value.field == "parallel.offload.optimizer"
