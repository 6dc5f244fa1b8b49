from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.hardware.load import load_cluster
from clustersim.memory import Kernels, layer_activation_bytes, memory_report
from clustersim.parallel.layout import ParallelLayout
from clustersim.units import MiB
from tests.conftest import preset

GPT = preset("gpt3-175b")


def test_korthikanti_table2_with_flash_attention():
    s, b, h, a = 2048, 1, 12288, 96
    lse = 4 * a * s * b                       # flash attention's fp32 log-sum-exp replaces 5as^2b
    stats = 2 * 2 * 4 * s * b                 # two LayerNorms keep fp32 mean and rstd per token
    # no parallelism: sbh * 34
    assert layer_activation_bytes(GPT, ParallelLayout(micro_batch=b), "bf16") == s * b * h * 34 + lse + stats
    # TP without SP: sbh (10 + 24 / t); the norms' statistics stay whole
    got = layer_activation_bytes(GPT, ParallelLayout(tp=8), "bf16")
    assert got == s * b * h * 10 + stats + (s * b * h * 24 + lse) / 8
    # TP + SP: sbh 34 / t; selective recompute drops the log-sum-exp (the attention core is recomputed)
    sp = ParallelLayout(tp=8, sequence_parallel=True)
    assert layer_activation_bytes(GPT, sp, "bf16") == (s * b * h * 34 + lse + stats) / 8
    assert layer_activation_bytes(GPT, replace(sp, recompute="selective"), "bf16") == (s * b * h * 34 + stats) / 8
    # full recompute: 2 sbh / t
    assert layer_activation_bytes(GPT, replace(sp, recompute="full"), "bf16") == 2 * s * b * h / 8
    # CP halves the tokens
    assert layer_activation_bytes(GPT, replace(sp, cp=2), "bf16") == (s * b * h * 34 + lse + stats) / 16


def test_swiglu_gqa_no_dropout():
    m = preset("llama3-8b")   # h 4096, kv 1024, f 14336, 32 heads, s 8192, no dropout
    s, h = 8192, 4096
    replicated = 4 * 2 * s * h + 2 * 4 * s                       # 2 norm inputs (+ fp32 rstd), QKV and fc1 inputs
    attention = 2 * s * h * (1 + 2 * 1024 / 4096) + 2 * s * h + 4 * 32 * s
    mlp = 2 * s * 14336 * 3                                      # gate+up output (2f) and fc2 input (f)
    assert layer_activation_bytes(m, ParallelLayout(), "bf16") == replicated + attention + mlp
    # torchtitan's eager SwiGLU keeps w1's output, silu's output, w3's output and the product: 4f
    eager = layer_activation_bytes(m, ParallelLayout(), "bf16", kernels=Kernels(elementwise="eager"))
    assert eager == replicated + attention + 2 * s * 14336 * 4


def test_gpt3_on_8_a100_tp1_does_not_fit():
    cluster = load_cluster("dgx-a100", 1)
    r = memory_report(GPT, ParallelLayout(dp=8, global_batch=8), cluster, "bf16", 96, 1, True, True)
    assert not r.fits
    assert r.weights > 300e9                                     # 175B x 2 bytes


def test_gpt3_megatron_layout_fits():
    # Korthikanti 2022 Table 3: GPT-3 175B, TP 8, PP 8, selective recompute + SP on 80 GB A100;
    # 1F1B: the first stage holds pp = 8 micro-batches of its 12 layers
    cluster = load_cluster("dgx-a100", 128)
    lay = ParallelLayout(tp=8, pp=8, dp=16, sequence_parallel=True, recompute="selective", zero_stage=1,
                         micro_batch=1, global_batch=1536)
    first = memory_report(GPT, lay, cluster, "bf16", 12, 8, True, False)
    last = memory_report(GPT, lay, cluster, "bf16", 12, 1, False, True)
    assert first.fits and last.fits
    # hand check of the first stage's states: 12 layers x (1,811,939,328 - 49,152) / 8 + 49,152 params
    # + embedding 51200 / 8 x 12288 = 2,797,174,784 params
    params = 12 * ((12 * 12288**2 + 4 * 12288 - 4 * 12288) // 8 + 4 * 12288) + 6400 * 12288
    assert first.weights == 2 * params
    assert first.gradients == 4 * params
    assert first.optimizer_states == round(12 * params / 16)
    js = first.to_json()
    assert first.allocated_peak_bytes == sum(js[k] for k in (
        "weights", "gradients", "optimizer_states", "activations", "transient", "comm_buffers", "workspace"))
    assert first.peak_bytes_per_gpu == first.reserved_peak_bytes == first.allocated_peak_bytes + sum(
        js[k] for k in ("fragmentation", "cuda_context", "nccl_buffers"))
    assert js["verdict"] == "fits" and js["interval"][0] < first.peak_bytes_per_gpu < js["interval"][1]


def test_to_json_ints_and_frozen():
    cluster = load_cluster("dgx-h100", 1)
    r = memory_report(preset("llama3-8b"), ParallelLayout(tp=8, global_batch=1), cluster, "bf16", 32, 1, True, True)
    js = r.to_json()
    assert all(type(v) is int for k, v in js.items() if k not in ("fits", "verdict", "interval"))
    assert js["workspace"] == 64 * MiB and js["cuda_context"] == 512 * MiB and js["nccl_buffers"] == 128 * MiB
    assert js["capacity_bytes_per_gpu"] == 81559 * MiB


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 1, 2, 3]), st.integers(1, 16),
       st.sampled_from(["none", "selective", "selective-op", "full"]), st.booleans())
def test_zero_and_recompute_only_reduce(dp, zero, in_flight, rec, sp):
    cluster = load_cluster("dgx-a100", 16)
    base = ParallelLayout(tp=8, dp=dp, sequence_parallel=sp, global_batch=dp)
    r0 = memory_report(GPT, base, cluster, "bf16", 12, in_flight, False, False)
    rz = memory_report(GPT, replace(base, zero_stage=zero, recompute=rec), cluster, "bf16", 12, in_flight,
                       False, False)
    assert rz.weights + rz.gradients + rz.optimizer_states <= r0.weights + r0.gradients + r0.optimizer_states
    assert rz.activations <= r0.activations
    more = memory_report(GPT, replace(base, zero_stage=zero, recompute=rec), cluster, "bf16", 12, in_flight + 1,
                         False, False)
    assert more.activations > rz.activations


def test_standard_attention_keeps_korthikanti_s2_term():
    # Korthikanti Table 2 exactly: sbh (34 + 5 a s / h) unparallelised; with TP+SP all / t
    s, b, h, a = 2048, 1, 12288, 96
    lay = ParallelLayout(tp=8, sequence_parallel=True)
    stats = 2 * 2 * 4 * s * b
    got = layer_activation_bytes(GPT, lay, "bf16", "standard")
    assert got == (s * b * h * (34 + 5 * a * s / h) + stats) / 8
    # selective recompute drops the 5 a s / h term
    got = layer_activation_bytes(GPT, replace(lay, recompute="selective"), "bf16", "standard")
    assert got == (s * b * h * 34 + stats) / 8
