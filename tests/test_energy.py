"""Power and energy: by hand, in run --json, and against the compare rows."""

from __future__ import annotations

import pytest

from clustersim import energy
from clustersim.api import estimate
from clustersim.hardware.load import load_cluster
from clustersim.scenario import load_scenario


def test_energy_by_hand():
    # 64 DGX H100 at 10.2 kW x 0.76 = 7.752 kW each = 496.1 kW IT; x PUE 1.56 = 773.9 kW facility.
    # A 6 s step of 512 x 8192 tokens: 773.9 kW x 6 s / 3.6e6 = 1.2899 kWh; / 4,194,304 tokens = 1.1071 J/token
    e = energy.energy_report(load_cluster("dgx-h100", 64), 6.0, 512 * 8192)
    assert e.node_power_w == pytest.approx(7752)
    assert e.facility_power_w == pytest.approx(64 * 7752 * 1.56)
    assert e.energy_per_step_kwh == pytest.approx(64 * 7752 * 1.56 * 6 / 3.6e6)
    assert e.energy_per_token_j == pytest.approx(64 * 7752 * 1.56 * 6 / (512 * 8192))
    assert e.run_energy_kwh(1e12) == pytest.approx(e.energy_per_token_j * 1e12 / 3.6e6)
    assert e.gpu_power_w == pytest.approx(700 * 0.76)


def test_node_power_falls_back_to_tdp_plus_host_share():
    mi300x = load_cluster("mi300x", 1)   # no datasheet node power: 8 x (750 + 575) W
    assert energy.node_max_power_w(mi300x) == pytest.approx(8 * (750 + 575))
    assert energy.node_max_power_w(load_cluster("gb200-nvl72", 18)) == pytest.approx(6700)


def test_a_preset_with_another_gpu_or_gpu_count_takes_the_per_gpu_rule():
    """dgx-h100 with gb300 GPUs kept the DGX H100's 10.2 kW (8 x 1.4 kW GPUs drawing more than
    the node), and with 4 GPUs per node the same 10.2 kW (energy per token doubled)."""
    assert energy.node_max_power_w(load_cluster("dgx-h100", 1)) == pytest.approx(10_200)
    assert energy.node_max_power_w(load_cluster("dgx-h100", 1, gpu="h100-sxm-80gb")) == pytest.approx(10_200)
    gb300 = load_cluster("dgx-h100", 1, gpu="gb300")
    assert energy.node_max_power_w(gb300) == pytest.approx(8 * (gb300.gpu.tdp_w + energy.HOST_W_PER_GPU))
    assert energy.node_max_power_w(load_cluster("dgx-h100", 1, gpus_per_node=4)) == pytest.approx(4 * (700 + 575))


def test_pue_override_and_run_json():
    s = load_scenario(None, ["cluster.pue=1.1"])
    out = estimate(s).to_json(tokens=2e12)
    e = out["energy"]
    assert e["pue"] == 1.1
    assert e["facility_power_kw"] == pytest.approx(e["it_power_kw"] * 1.1)
    assert e["training_run_mwh"] == pytest.approx(2 * e["energy_per_trillion_tokens_mwh"])
    assert e["energy_per_step_kwh"] == pytest.approx(e["facility_power_kw"] * out["step_time_s"] / 3600)
    assert set(e) >= {"gpu_power_w", "node_power_w", "it_power_kw", "pue", "facility_power_kw",
                      "energy_per_step_kwh", "energy_per_token_j", "energy_per_trillion_tokens_mwh"}


def test_a_mixed_cluster_takes_the_scenario_pue():
    """`cluster.pue` with node groups was refused ("set it per group") and the groups refuse the key."""
    from pathlib import Path
    s = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "llama3_70b_a100_h100_mixed.yaml",
                      ["cluster.pue=1.2"])
    assert all(g.cluster.pue == 1.2 for g in s.node_groups)
