"""Userbuffers TP-comm overlap: the GEMMs beside the TP collectives are cut into pieces or lose SMs."""

import math

import pytest

from clustersim.compute import transformer_layer_cost
from clustersim.compute.gemm import gemm_op, linear_gemm_op
from clustersim.compute.tp_overlap import (
    BULK,
    COMM_SMS,
    PIPELINE,
    PIPELINE_SPLITS,
    RING_EXCHANGE,
    overlapped_gemm,
)
from clustersim.parallel.layout import ParallelLayout
from clustersim.uncertainty.reference import reference_runs
from tests.conftest import preset

GPT177 = preset("megatron-core-177b")


def test_method_sets_follow_transformer_engine_defaults():
    assert {"qkv", "fc1", "attn_out_proj_dgrad", "fc2_dgrad"} == RING_EXCHANGE
    assert {"attn_out_proj", "fc2"} == PIPELINE
    assert {"qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"} == BULK
    assert not (RING_EXCHANGE & PIPELINE) and not (PIPELINE & BULK) and not (RING_EXCHANGE & BULK)


def test_ring_exchange_runs_tp_pieces_of_m_over_tp_rows(h100):
    m, n, k, tp = 4096, 6144, 12288, 8
    op = overlapped_gemm("fc1", m, n, k, h100, "bf16", "", tp)
    piece = gemm_op("fc1", m // tp, n, k, h100, "bf16")
    assert op.time_s == pytest.approx(tp * piece.time_s)
    assert op.flops == linear_gemm_op("fc1", m, n, k, h100, "bf16").flops
    # 512-row pieces leave a partial wave on 132 SMs: slower than the whole GEMM
    assert op.time_s > 1.1 * linear_gemm_op("fc1", m, n, k, h100, "bf16").time_s


def test_pipeline_and_bulk_gemms_lose_the_comm_sms(h100):
    m, n, k = 65536, 12288, 6144   # pieces of 16,384 rows: no quantization loss of their own
    whole = gemm_op("fc2", m, n, k, h100, "bf16").time_s
    piece = gemm_op("fc2", m // PIPELINE_SPLITS, n, k, h100, "bf16").time_s
    margin = h100.num_sms / (h100.num_sms - COMM_SMS)
    assert overlapped_gemm("fc2", m, n, k, h100, "bf16", "", 8).time_s == pytest.approx(PIPELINE_SPLITS * piece * margin)
    assert overlapped_gemm("fc1_wgrad", m, n, k, h100, "bf16", "", 8).time_s == pytest.approx(whole * margin)


def test_untouched_gemms_and_no_tp(h100):
    assert overlapped_gemm("fc2_wgrad", 4096, 6144, 12288, h100, "bf16", "", 8) is None
    assert overlapped_gemm("attn_out_proj_wgrad", 4096, 6144, 12288, h100, "bf16", "", 8) is None
    assert overlapped_gemm("fc1", 4096, 6144, 12288, h100, "bf16", "", 1) is None


def test_fp8_casts_are_paid_once_not_per_piece(h100):
    m, n, k, tp = 4096, 13312, 16384, 8
    op = overlapped_gemm("fc1", m, n, k, h100, "fp8", "tensorwise", tp)
    whole = linear_gemm_op("fc1", m, n, k, h100, "fp8", "tensorwise")
    kernel_extra = tp * gemm_op("fc1", m // tp, n, k, h100, "fp8").time_s - gemm_op("fc1", m, n, k, h100, "fp8").time_s
    assert op.time_s == pytest.approx(whole.time_s + kernel_extra)


def test_layer_pays_only_with_sequence_parallel_and_the_flag(h100):
    def gemm_time(**kw):
        lc = transformer_layer_cost(GPT177, ParallelLayout(tp=8, **kw), h100, "bf16")
        return lc.forward.compute_time_s + lc.backward.compute_time_s

    plain = gemm_time(sequence_parallel=True)
    assert gemm_time(sequence_parallel=False, tp_comm_overlap=True) == pytest.approx(gemm_time(sequence_parallel=False))
    assert gemm_time(sequence_parallel=True, tp_comm_overlap=True) > 1.05 * plain


def test_reference_pipelined_rows_interleave_one_layer_per_virtual_stage():
    runs = [r for r in reference_runs() if r.table == "megatron-h100-2024"]
    piped = [r for r in runs if r.scenario["parallel"]["pp"] > 1]
    assert len(piped) == 5
    for r in piped:
        par = r.scenario["parallel"]
        layers = preset(r.scenario["model"]["preset"]).layers
        assert par["schedule"] == "interleaved-1f1b"
        assert par["virtual_stages"] * par["pp"] == layers
        assert math.gcd(layers // par["pp"], par["virtual_stages"]) == par["virtual_stages"]
