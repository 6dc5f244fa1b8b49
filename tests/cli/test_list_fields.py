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
