from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.compute.arch import arch_for
from clustersim.compute.gemm import gemm_efficiency, gemm_op


def test_reproduces_sustained_mamf_at_its_shape(a100):
    # stas00 MAMF table: A100 271.2 TFLOPS at 1024x10240x5120; sustained x 0.831 (no A100 MSMF:
    # mean of H200's and B200's MSMF/MAMF) -> 225.4. Hopper runs on its own fitted microbenchmark
    # (tests/compute/test_microbench.py).
    ratio = (698.6 / 823.9 + 1426.4 / 1751.2) / 2
    assert abs(gemm_efficiency(1024, 10240, 5120, a100, "bf16") * 312e12 - 271.2e12 * ratio) < 1e9


def test_hopper_sustains_what_one_h100_sustained(h100):
    # validation/micro/h100_micro_2026-11-26.json: 8192 x 4096 x 14336 back to back for 25 s,
    # median of the 1-s windows after the first 689.1 TFLOP/s; the fitted model within 2%
    eff = gemm_efficiency(8192, 14336, 4096, h100, "bf16")
    assert abs(eff * 989e12 / 689.1e12 - 1) < 0.02


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 65536), st.integers(1, 65536), st.integers(1, 65536))
def test_never_above_mamf_and_positive(a100, m, n, k):
    eff = gemm_efficiency(m, n, k, a100, "bf16")
    arch = arch_for(a100)
    assert 0 < eff <= arch.mamf_for("bf16")[0] * arch.sustained_ratio + 1e-12


def test_tile_quantization_costs(a100):
    # M = 4 x 108 x 128, N = 128: 432 tiles of 128x128 = 4 full waves. N = 129: the best tiling
    # pads N to 192 (256x64 tiles, 6 full waves): 129/192 = 0.67 of the aligned efficiency
    m = 4 * 108 * 128
    aligned = gemm_efficiency(m, 128, 4096, a100, "bf16")
    ragged = gemm_efficiency(m, 129, 4096, a100, "bf16")
    assert abs(ragged / aligned - 129 / 192) < 0.01


def test_wave_quantization_costs(a100):
    # 108 SMs: 128x128 tiles, M = 128*108 fills one wave; one more tile row starts a second wave
    full = gemm_efficiency(128 * 108, 128, 8192, a100, "bf16")
    one_more = gemm_efficiency(128 * 109, 128, 8192, a100, "bf16")
    assert one_more < 0.7 * full


def test_small_k_ramp(a100):
    assert gemm_efficiency(8192, 8192, 256, a100, "bf16") < gemm_efficiency(8192, 8192, 8192, a100, "bf16")


def test_calibrated_profile_uses_fixed_fraction(a100):
    cal = replace(a100, gemm_efficiency=0.5)
    assert gemm_efficiency(1000, 3000, 77, cal, "bf16") == 0.5
    op = gemm_op("x", 8192, 8192, 8192, cal, "bf16")
    # 2 * 8192^3 = 1.0995e12 FLOP at 0.5 * 312e12 -> 7.048 ms
    assert abs(op.time_s - 2 * 8192**3 / 156e12) < 1e-9


def test_thin_gemm_is_memory_bound(a100):
    # M = 1: reading the 8192 x 8192 bf16 weight (134 MB) dominates: 134.2e6 / (2039e9 * 0.85) = 77.4 us
    op = gemm_op("gemv", 1, 8192, 8192, a100, "bf16")
    assert op.flops == 2 * 8192 * 8192
    assert abs(op.time_s - (8192 * 8192 * 2 + 8192 * 2 * 2) / (2039e9 * 0.85)) < 1e-9
