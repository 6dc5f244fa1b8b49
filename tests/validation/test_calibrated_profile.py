"""A written calibrated profile loads like any preset, with the fitted numbers."""

import pytest

from clustersim import units
from clustersim.calibrate.profile import (
    CalibratedCluster,
    CalibratedGpu,
    fabric_from_fit,
    render_profile,
    write_profile,
)
from clustersim.hardware.load import load_cluster


def test_fabric_split_into_nominal_times_efficiency():
    # 1 Gbit/s tbf = 125e6 B/s nominal; 118.75e6 achieved -> efficiency 0.95
    f = fabric_from_fit("x", "ethernet", 125e6, 118.75e6, 50e-6, "t")
    assert f.bw_bytes_per_s == 125e6 and f.efficiency == pytest.approx(0.95)
    # achieved above nominal (or no nominal): the achieved rate becomes the rate, efficiency 1
    g = fabric_from_fit("x", "ethernet", None, 3e9, 1e-5, "t")
    assert g.bw_bytes_per_s == 3e9 and g.efficiency == 1.0


def test_profile_round_trip(tmp_path, monkeypatch):
    gpu = CalibratedGpu("calibrated-cpu-test", 69.2e9, 7.7e9, 12 * units.GiB, "test run")
    fabric = fabric_from_fit("calibrated-test", "ethernet", 125e6, 118.75e6, 250e-6, "test run")
    cluster = CalibratedCluster("calibrated-test", gpu.name, 1, 4, fabric.name, fabric.name, 1, "each rank a host")
    path = write_profile(tmp_path / "p.yaml", render_profile([gpu], [fabric], [cluster], "header"))
    monkeypatch.setenv("CLUSTERSIM_PROFILES", str(path))
    c = load_cluster("calibrated-test", 3)
    assert c.num_nodes == 3 and c.gpus_per_node == 1 and c.nics_per_node == 1
    assert c.gpu.peak("fp32") == pytest.approx(69.2e9, rel=1e-5)
    assert c.gpu.gemm_efficiency == 1.0
    assert c.gpu.hbm_bw_bytes_per_s == pytest.approx(7.7e9, rel=1e-5)
    assert c.scale_out.bw_bytes_per_s * c.scale_out.efficiency == pytest.approx(118.75e6, rel=1e-5)
    assert c.scale_out.latency_s == pytest.approx(250e-6, rel=1e-5)
