"""The shared experts' total width (``model.moe.shared_ffn_hidden``, Megatron's
--moe-shared-expert-intermediate-size) and the input padded to capacity (``pad_to_capacity``):
both were not stateable before (a 700-wide shared MLP had to be written as a whole expert)."""

import pytest

from clustersim.compute.flops import model_flops_per_step
from clustersim.compute.moe_routing import load_factor
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict

MOE = {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}
BASE = {"layers": 2, "hidden": 512, "heads": 8, "vocab": 1000, "seq_len": 128, "ffn_act": "swiglu"}


def _model(**moe):
    return scenario_from_dict({"model": {**BASE, "moe": {**MOE, **moe}}}).model


def test_shared_width_sets_params_and_flops():
    narrow, none = _model(shared_ffn_hidden=700), _model()
    assert narrow.shared_expert_params() == 3 * 512 * 700
    assert narrow.main_params() - none.main_params() == 2 * 3 * 512 * 700
    assert narrow.active_params() - none.active_params() == 2 * 3 * 512 * 700
    # forward 2 FLOPs per multiply-add, x3 with the backward, over every token of the batch
    assert model_flops_per_step(narrow, 1) - model_flops_per_step(none, 1) == pytest.approx(
        6 * 128 * 2 * 3 * 512 * 700)
    assert _model(shared_experts=2).moe_shared_ffn_hidden == 2048
    assert _model(shared_experts=2, shared_ffn_hidden=2048) == _model(shared_experts=2)


def test_shared_width_and_count_must_agree():
    with pytest.raises(InputError) as exc:
        _model(shared_experts=1, shared_ffn_hidden=700)
    assert exc.value.field == "model.moe.shared_ffn_hidden"


def test_padding_to_capacity_loads_every_rank_to_the_capacity():
    assert load_factor(_model(capacity_factor=1.5, pad_to_capacity=True)) == 1.5
    assert load_factor(_model(capacity_factor=1.5)) == 1.0
    assert load_factor(_model(capacity_factor=1.5, imbalance=1.2, pad_to_capacity=True)) == 1.5
    with pytest.raises(InputError) as exc:
        _model(pad_to_capacity=True)
    assert exc.value.field == "model.moe.pad_to_capacity"


def test_shared_width_sets_the_per_gpu_params_and_saved_activations():
    from clustersim.compute.moe import moe_params_per_gpu
    from clustersim.memory.moe_saved import _moe_bytes
    from clustersim.parallel.layout import ParallelLayout
    narrow, none = _model(shared_ffn_hidden=700), _model()
    assert moe_params_per_gpu(narrow, 2, 1, 1)[0] - moe_params_per_gpu(none, 2, 1, 1)[0] == 3 * 512 * 350
    layout = ParallelLayout(tp=2, micro_batch=1)
    # 128 tokens x 350 (the TP share): the SwiGLU input (2 x 2 bytes) and the fc2 input (2 bytes)
    assert _moe_bytes(narrow, layout, 2, 2) - _moe_bytes(none, layout, 2, 2) == 128 * 350 * (2 * 2 + 2)
