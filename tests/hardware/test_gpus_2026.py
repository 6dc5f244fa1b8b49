"""GPU profiles of parts many runs still use: A100 40 GB (SXM and PCIe), H100 PCIe, H100 NVL, GH200,
and the DGX A100 40GB cluster preset; their GEMM rates where a measurement is published."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clustersim.compute.arch import arch_for, gemm_measured
from clustersim.compute.gemm import gemm_op
from clustersim.hardware.load import load_cluster, load_gpu
from clustersim.scenario import load_scenario

NEW = ("a100-sxm-40gb", "a100-pcie-40gb", "h100-pcie-80gb", "h100-nvl-94gb", "gh200-144gb")


def test_clustersim_list_gpus_shows_them() -> None:
    out = subprocess.run([sys.executable, "-m", "clustersim", "list", "gpus"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    assert all(name in out.stdout for name in NEW)


# capacity as nvidia-smi reports it where published (MiB; docs/hardware.md): A100 40 GB 40536 (the smaller of
# two driver generations' totals, the conservative one: a 40 GB part at 40960 MiB read a job needing 39.97 GiB
# as fitting where 39.59 GiB exist), H100 80 GB 81559, H100 NVL 95830 (it held the datasheet's 94 GB as 94 GiB)
@pytest.mark.parametrize("name,bf16,hbm_mib,bw", [
    ("a100-sxm-40gb", 312, 40536, 1555), ("a100-pcie-40gb", 312, 40536, 1555), ("h100-pcie-80gb", 756, 81559, 2000),
    ("h100-nvl-94gb", 835.5, 95830, 3900), ("gh200-144gb", 989, 141 * 1024, 4800), ("a100-sxm-80gb", 312, 81920, 2039)])
def test_datasheet_numbers(name: str, bf16: float, hbm_mib: float, bw: float) -> None:
    gpu = load_gpu(name)
    assert gpu.peak("bf16") == bf16 * 1e12
    assert gpu.hbm_capacity_bytes == hbm_mib * 2**20
    assert gpu.hbm_bw_bytes_per_s == bw * 1e9


# Blackwell as nvidia-smi reports it (public dumps): the profiles held the marketing 180/186/288 GB
# as GiB, 7% more than a B300 has (a job at 260 GiB read "fits" on a 268.6 GiB GPU)
@pytest.mark.parametrize("name,hbm_mib,tdp_w", [("b200-sxm-180gb", 183359, 1000), ("b300-sxm-288gb", 275040, 1100),
                                                ("gb200", 189471, 1200), ("gb300", 284208, 1400)])
def test_blackwell_capacity_and_power_cap_as_the_driver_reports(name: str, hbm_mib: int, tdp_w: float) -> None:
    gpu = load_gpu(name)
    assert gpu.hbm_capacity_bytes == hbm_mib * 2**20
    assert gpu.tdp_w == tdp_w


def test_measured_gemm_rates_where_published() -> None:
    """stas00/ml-engineering MAMF table: A100 PCIe 252.9 of 312, GH200 828.6 of 989 (BF16); no
    H100 PCIe / NVL measurement, so those borrow H100 SXM's fraction and say so."""
    assert arch_for(load_gpu("a100-pcie-40gb")).mamf_for("bf16")[0] == pytest.approx(252.9 / 312)
    assert arch_for(load_gpu("gh200-144gb")).mamf_for("bf16")[0] == pytest.approx(828.6 / 989)
    assert arch_for(load_gpu("gh200-144gb")).mamf_for("fp8")[0] == pytest.approx(1535.0 / 1979)
    assert arch_for(load_gpu("a100-sxm-40gb")) is arch_for(load_gpu("a100-sxm-80gb"))
    assert gemm_measured(load_gpu("a100-pcie-40gb")) and gemm_measured(load_gpu("gh200-144gb"))
    assert not gemm_measured(load_gpu("h100-pcie-80gb")) and not gemm_measured(load_gpu("h100-nvl-94gb"))
    sxm = gemm_op("g", 8192, 8192, 8192, load_gpu("a100-sxm-40gb"), "bf16").time_s
    pcie = gemm_op("g", 8192, 8192, 8192, load_gpu("a100-pcie-40gb"), "bf16").time_s
    assert pcie > sxm * 1.05      # 81.1% against 86.9% of the same peak


def test_a_run_on_dgx_a100_40gb_uses_the_40_gb_capacity() -> None:
    cluster = load_cluster("dgx-a100-40gb", 2)
    assert cluster.gpu.name == "a100-sxm-40gb" and cluster.gpus_per_node == 8
    sc = load_scenario(None, ["cluster.preset=dgx-a100-40gb", "cluster.nodes=2"])
    out = subprocess.run([sys.executable, "-m", "clustersim", "run", "--json", "--set", "cluster.preset=dgx-a100-40gb",
                          "--set", "cluster.nodes=2"], capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout)
    assert report["cluster"]["gpu"] == "a100-sxm-40gb" and sc.cluster.gpu.name == "a100-sxm-40gb"
    assert report["memory"]["capacity_bytes_per_gpu"] == 40536 * 2**20
