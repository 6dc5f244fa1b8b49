"""FP8 / FP4 training: which GEMMs go low precision, what stays BF16, the cast kernels' bytes,
and which GEMM efficiencies are measured."""

from __future__ import annotations

import pytest

from clustersim.compute import precision
from clustersim.compute.arch import arch_for, gemm_measured
from clustersim.compute.attention import attention_ops
from clustersim.compute.dtypes import weight_bytes
from clustersim.compute.gemm import gemm_op, linear_gemm_op
from clustersim.compute.heads import output_cost
from clustersim.hardware.load import load_gpu
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset


@pytest.fixture(scope="module")
def b200():
    return load_gpu("b200-sxm-180gb")


def test_quantize_bytes_by_hand():
    # 8192 x 8192 x 8192 GEMM: operands 2 x 8192^2 elements, half charged to this GEMM = 8192^2;
    # MXFP8: read 2 B, write value + E8M0 scale twice: 2 + 2 x (1 + 1/32) = 4.0625 B per element
    assert precision.quantize_bytes(8192, 8192, 8192, "fp8", "mxfp8") == pytest.approx(8192**2 * 4.0625)
    # NVFP4: 2 + 2 x (0.5 + 1/16) = 3.125, + 2 for its amax pass; per-tensor FP8: 2 + 2 x 1 = 4 with
    # delayed scaling (amax history), + 2 with current scaling (an amax kernel reads the tensor first)
    assert precision.quantize_bytes(8192, 8192, 8192, "fp4", "nvfp4") == pytest.approx(8192**2 * 5.125)
    assert precision.quantize_bytes(8192, 8192, 8192, "fp8", "delayed") == pytest.approx(8192**2 * 4)
    assert precision.quantize_bytes(8192, 8192, 8192, "fp8", "tensorwise") == pytest.approx(8192**2 * 6)
    assert precision.quantize_bytes(8192, 8192, 8192, "fp8", "blockwise") == pytest.approx(8192**2 * (4 + 2 / 32))
    assert precision.quantize_bytes(8192, 8192, 8192, "bf16", "") == 0


def test_low_precision_linear_gemms_are_faster_and_carry_cast_bytes(b200):
    m, n, k = 16384, 8192, 8192
    bf16 = linear_gemm_op("fc1", m, n, k, b200, "bf16")
    fp8 = linear_gemm_op("fc1", m, n, k, b200, "fp8", "mxfp8")
    fp4 = linear_gemm_op("fc1", m, n, k, b200, "fp4", "nvfp4")
    assert bf16 == gemm_op("fc1", m, n, k, b200, "bf16")
    assert fp4.time_s < fp8.time_s < bf16.time_s
    assert fp8.flops == bf16.flops == 2.0 * m * n * k        # model FLOPs do not change
    assert fp8.bytes_moved > gemm_op("fc1", m, n, k, b200, "fp8").bytes_moved
    # FP4 keeps 15% of the layers in BF16: time-weighted between the two
    raw4 = gemm_op("fc1", m, n, k, b200, "fp4")
    assert fp4.time_s > 0.85 * raw4.time_s + 0.15 * bf16.time_s


def test_attention_and_logits_stay_bf16(b200):
    args = (1, 8192, 8192, 64, 8, 128, b200)
    assert attention_ops(*args, "fp8", 2) == attention_ops(*args, "bf16", 2)
    assert attention_ops(*args, "fp4", 2) == attention_ops(*args, "bf16", 2)
    model, layout = preset("llama3-8b"), ParallelLayout(tp=1)
    logits = [op for op in output_cost(model, layout, b200, "fp8").forward.ops if op.name == "logits"][0]
    assert logits.time_s == [op for op in output_cost(model, layout, b200, "bf16").forward.ops
                             if op.name == "logits"][0].time_s


def test_weight_copies():
    assert weight_bytes("bf16") == 2
    assert weight_bytes("fp8") == 4
    assert weight_bytes("fp4") == pytest.approx(2 + precision.weight_copy_bytes("fp4", "nvfp4"))


@pytest.mark.parametrize("gpu,dtype,measured", [
    ("b200-sxm-180gb", "bf16", True), ("b200-sxm-180gb", "fp8", True), ("b200-sxm-180gb", "fp4", False),
    ("gb200", "bf16", True), ("gb300", "bf16", False), ("b300-sxm-288gb", "fp8", True),
    ("mi300x", "bf16", True), ("mi300x", "fp8", False), ("mi325x", "bf16", True), ("mi355x", "bf16", True),
    ("h20-96gb", "bf16", False), ("h800-sxm-80gb", "fp8", True), ("a100-sxm-80gb", "bf16", True),
])
def test_gemm_measured_flags(gpu, dtype, measured):
    g = load_gpu(gpu)
    assert gemm_measured(g, dtype) is measured
    assert arch_for(g).gemm_measured is (gpu not in ("gb300", "h20-96gb"))


def test_arch_lookup_does_not_confuse_names():
    assert arch_for(load_gpu("h20-96gb")).name == "h20"
    assert arch_for(load_gpu("h200-sxm-141gb")).name == "h200"
    assert arch_for(load_gpu("gb200")).name == "gb200"
    assert arch_for(load_gpu("b200-sxm-180gb")).name == "b200"
    # MI300X reaches 51% of peak in BF16 GEMMs (668.4 of 1307.4, stas00 MAMF table)
    assert arch_for(load_gpu("mi300x")).mamf_for("bf16")[0] == pytest.approx(668.4 / 1307.4)


@pytest.mark.parametrize("name,arch", [("rtx-a1000", "generic"), ("my-h100", "generic"), ("h2000-x", "generic"),
                                       ("h100-sxm-80gb-mine", "h100"), ("a100-sxm-40gb", "a100"),
                                       ("mi300a", "mi300x")])
def test_a_user_gpu_takes_measurements_only_by_its_name_prefix(name, arch):
    """A user's own GPU named "rtx-a1000" took the A100's GEMM efficiency and its evidence (its
    interval narrowed) because "a100" is inside the name."""
    from dataclasses import replace
    g = replace(load_gpu("h100-sxm-80gb"), name=name)
    assert arch_for(g).name == arch


def test_a_dtype_the_gpu_lacks_lists_only_training_dtypes_it_runs() -> None:
    """The A100 profile lists tf32 (a matmul mode); the message offered it as a training.dtype,
    which the scenario then refused."""
    from clustersim.compute.precision import TRAINING_DTYPES, resolve_recipe
    from clustersim.errors import InputError

    gpu = load_gpu("a100-sxm-80gb")
    assert "tf32" in gpu.dtypes
    with pytest.raises(InputError) as err:
        resolve_recipe("fp8", None, None, gpu)
    offered = err.value.allowed.split(": ")[1].split(", ")
    assert offered == ["bf16", "fp16", "fp32"] and set(offered) <= set(TRAINING_DTYPES)


def test_megatron_casts_the_weights_once_per_step_spread_over_its_micro_batches(b200):
    """TE's FP8 weight cache (is_first_microbatch, set by Megatron-Core's schedules): a forward or
    dgrad GEMM pays 1/m of its weight's casts; a wgrad GEMM has no weight operand; torchtitan's
    Float8Linear casts in every forward; BF16 casts nothing."""
    from clustersim.compute.layer import transformer_layer_cost
    from clustersim.parallel.layout import ParallelLayout
    from clustersim.workload.presets import MODEL_PRESETS, model_from_fields

    assert precision.weight_cast_share("fp8", True, 8) == 1 / 8
    assert precision.weight_cast_share("fp8", False, 8) == 1.0
    assert precision.weight_cast_share("bf16", True, 8) == 1.0
    model = model_from_fields("llama3-8b", MODEL_PRESETS["llama3-8b"])

    def ops(framework: str, micro_batches: int) -> dict[str, object]:
        layout = ParallelLayout(dp=1, micro_batch=1, global_batch=micro_batches)
        cost = transformer_layer_cost(model, layout, b200, "fp8", recipe="mxfp8", framework=framework)
        return {op.name: op for op in (*cost.forward.ops, *cost.backward.ops) if hasattr(op, "flops")}

    one, eight = ops("megatron-core", 1), ops("megatron-core", 8)
    per_element = 2 + 2 * (1 + 1 / 32)
    h, q_n = model.hidden, (model.heads + 2 * model.kv_heads) * model.head_dim
    saved = h * q_n * (1 - 1 / 8) / 2 * per_element           # the qkv weight's share of the fprop casts
    assert one["qkv"].bytes_moved - eight["qkv"].bytes_moved == pytest.approx(saved)
    assert one["qkv_dgrad"].bytes_moved - eight["qkv_dgrad"].bytes_moved == pytest.approx(saved)
    assert one["qkv_wgrad"].bytes_moved == eight["qkv_wgrad"].bytes_moved
    assert eight["qkv"].time_s < one["qkv"].time_s
    titan_one, titan_eight = ops("torchtitan", 1), ops("torchtitan", 8)
    assert titan_one["qkv"].bytes_moved == titan_eight["qkv"].bytes_moved == one["qkv"].bytes_moved
