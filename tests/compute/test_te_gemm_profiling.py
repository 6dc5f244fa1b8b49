"""The cast model against Transformer Engine's GEMM profiling tutorial (validation/micro/
te_gemm_b300_2026.csv; docs/compute.md, "Blackwell at training shapes"): the casts of FP8 current
scaling on an H200 (the tutorial's Hopper table) within 10% with the amax pass; the microscaled
casts' HBM efficiencies are the fit's, to the two decimals they are written with."""

from __future__ import annotations

import pytest

from clustersim.compute import precision
from clustersim.compute.roofline import memory_time_s
from clustersim.hardware.load import load_gpu
from validation.micro_fit import B300, fit_blackwell, layer_cast_bytes, te_b300_rows


def test_the_b300_gemm_table_is_read_and_compared():
    """The GEMM figures are a check, not a fit (docs/compute.md): every kernel figure has a row, and
    the model runs faster than the table at these shapes, by what the docs state."""
    rows = te_b300_rows()
    assert len(rows) == 18
    levels = fit_blackwell()
    assert 0.80 < levels["bf16"][0] < 0.90 and 0.78 < levels["fp8"][0] < 0.86 and 0.38 < levels["fp4"][0] < 0.48


def test_current_scaling_casts_match_the_h200_table():
    """20.285 ms with casts, 16.785 ms pre-quantized: 3.50 ms of casts for the layer's twelve GEMMs,
    each casting both its operands (twice what a training step charges each GEMM: every tensor is
    cast once there and shared by two GEMMs)."""
    gpu = load_gpu("h200-sxm-141gb")      # 4.8 TB/s, as the H200 NVL of the table
    total = layer_cast_bytes("fp8", "tensorwise")
    assert memory_time_s(total, gpu) == pytest.approx(3.50e-3, rel=0.10)
    # delayed scaling has no amax pass: 2 bytes per element less
    delayed = layer_cast_bytes("fp8", "delayed")
    assert delayed / total == pytest.approx(4 / 6)


def test_shipped_cast_efficiencies_are_the_fit():
    """The microscaled casts run at the HBM efficiency at which their modelled bytes take the
    measured seconds (autocast less pre-quantized); current scaling within 10% of the roofline."""
    from clustersim.compute.roofline import HBM_EFFICIENCY
    from validation.micro_fit import fit_casts
    fits = fit_casts()
    assert precision.CAST_HBM_EFFICIENCY["mxfp8"] == pytest.approx(fits["mxfp8"], abs=0.005)
    assert precision.CAST_HBM_EFFICIENCY["nvfp4"] == pytest.approx(fits["nvfp4"], abs=0.005)
    assert fits["fp8_current"] == pytest.approx(HBM_EFFICIENCY, rel=0.10)
    gpu = load_gpu(B300)
    assert precision.cast_time_s(1e9, "mxfp8", gpu) == pytest.approx(1e9 / (8e12 * 0.69))
    assert precision.cast_time_s(1e9, "delayed", gpu) == pytest.approx(memory_time_s(1e9, gpu))
