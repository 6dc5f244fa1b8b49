"""`clustersim list gpus --json` says every field, as its help promises: a validate profile's one
fitted rate (fp32) appeared nowhere, its bf16/fp8/fp4 columns null."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main


def test_every_peak_and_the_power_and_price_are_listed(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["list", "gpus", "--json"])
    assert exc.value.code == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    h100 = rows["h100-sxm-80gb"]
    assert h100["peak_TFLOPS"]["bf16"] == h100["bf16_TFLOPS"] and "fp32" in h100["peak_TFLOPS"]
    assert h100["tdp_w"] > 0 and h100["num_sms"] == 132 and "gemm_efficiency" in h100


@pytest.mark.parametrize("kind", ["clusters", "gpus", "fabrics"])
def test_json_has_every_key_of_the_profile(kind: str, capsys) -> None:
    """--json: every field. clusters lacked pcie, nodes_per_leaf, host_memory_GiB,
    host_memory_bw_GBps and node_power_kW; gpus lacked l2_MiB and vector_TFLOPS."""
    import yaml

    from clustersim.hardware.load import shipped_profile_dir
    with pytest.raises(SystemExit) as exc:
        main(["list", kind, "--json"])
    assert exc.value.code == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    entries = yaml.safe_load((shipped_profile_dir() / f"{kind}.yaml").read_text())
    for name, entry in entries.items():
        missing = set(entry) - set(rows[name])
        assert not missing, (name, missing)
    dgx = rows.get("dgx-a100", {})
    if kind == "clusters":
        assert (dgx["pcie"], dgx["nodes_per_leaf"], dgx["host_memory_GiB"], dgx["node_power_kW"]) == \
            ("pcie4-x16", 20, 1024, 6.5)
    if kind == "gpus":
        assert rows["a100-sxm-40gb"]["l2_MiB"] == 40 and rows["a100-sxm-40gb"]["vector_TFLOPS"] == 19.5
