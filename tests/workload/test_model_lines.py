"""The readable report's shape line names the local/global interleave in words (every 2nd layer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.scenario.loader import read_hf_config
from clustersim.workload.model_fields import model_from_fields
from clustersim.workload.model_summary import _ordinal, model_lines

HF = Path(__file__).resolve().parents[1] / "importers" / "hf_configs"


@pytest.mark.parametrize("n,text", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (6, "6th"), (11, "11th"),
                                    (12, "12th"), (13, "13th"), (21, "21st"), (22, "22nd"), (112, "112th")])
def test_ordinal(n: int, text: str) -> None:
    assert _ordinal(n) == text


@pytest.mark.parametrize("family,phrase", [("gpt-oss-120b", "sliding 128 (every 2nd layer full)"),
                                           ("gemma-3-27b-pt", "(every 6th layer full)"),
                                           ("Llama-4-Scout-17B-16E", "chunked 8192 (every 4th layer full)")])
def test_the_shape_line_of_a_published_config(family: str, phrase: str) -> None:
    model = model_from_fields(family, {**read_hf_config(str(HF / family / "config.json")), "seq_len": 4096})
    assert phrase in " ".join(model_lines(model))
