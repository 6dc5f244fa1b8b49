"""nccl-tests output: parsing a realistic 2-node log and fitting a fabric to it."""

from pathlib import Path

import pytest

from clustersim.calibrate.nccl_tests import parse_nccl_tests
from clustersim.errors import InputError

LOG = Path(__file__).parent / "data" / "all_reduce_perf_2x8_a100.log"


def test_parse_header_ranks_and_rows():
    run = parse_nccl_tests(LOG.read_text())[0]
    assert run.op == "all_reduce"
    assert (run.ranks, run.nodes, run.ranks_per_node) == (16, 2, 8)
    assert run.device == "NVIDIA A100-SXM4-80GB"
    assert run.nccl_version == "2.18.5+cuda12.2"
    assert len(run.rows) == 31  # 8 B .. 8 GiB by factors of 2: 2**3 .. 2**33
    last = run.rows[-1]
    assert last.size_bytes == 8 * 2**30 and last.count == 2 * 2**30 and last.dtype == "float"
    assert last.time_s == pytest.approx(87810e-6)


def test_rows_obey_nccl_tests_definitions():
    # nccl-tests doc/PERFORMANCE.md: algbw = S / t; busbw = algbw * 2(n-1)/n for all_reduce (n = 16)
    run = parse_nccl_tests(LOG.read_text())[0]
    for row in run.rows:
        if row.size_bytes >= 2**20:  # printed with 2 decimals: check where they carry 3+ digits
            assert row.algbw_GBps == pytest.approx(row.size_bytes / row.time_s / 1e9, rel=5e-3)
            assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 2 * 15 / 16, rel=5e-3)


def test_log_without_binary_name_needs_op():
    text = "\n".join(line for line in LOG.read_text().splitlines() if "all_reduce_perf" not in line)
    with pytest.raises(InputError):
        parse_nccl_tests(text)
    assert parse_nccl_tests(text, op="all_gather")[0].op == "all_gather"


def test_not_a_log_is_an_input_error():
    with pytest.raises(InputError):
        parse_nccl_tests("hello\nworld\n")


def test_fit_writes_a_profile_that_loads(tmp_path, monkeypatch):
    pytest.importorskip("clustersim.collectives")
    from clustersim.calibrate.import_nccl import fit_nccl_tests
    from clustersim.hardware.load import load_cluster
    res = fit_nccl_tests(LOG.read_text(), "dgx-a100", "a100-fitted", tmp_path / "p.yaml", min_size_bytes=2**20)
    assert res.tier == "scale_out"
    assert len(res.errors_pct) == 14  # 1 MiB .. 8 GiB
    assert 2 <= res.fit.points <= 14  # the bandwidth-bound ones among them
    assert 0 < res.efficiency <= 1 and res.latency_s > 0
    assert res.fit.median_abs_err_pct < 15
    monkeypatch.setenv("CLUSTERSIM_PROFILES", str(res.profile_path))
    c = load_cluster("a100-fitted", 2)
    assert c.scale_out.name == "a100-fitted" and c.gpus_per_node == 8
    assert c.scale_out.effective_bw_bytes_per_s == pytest.approx(res.fit.bw_bytes_per_s, rel=1e-4)
