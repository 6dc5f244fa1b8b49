"""The validation table against published runs (validation/published/memory_runs.yaml) and the
interval that comes from it (clustersim/memory/evidence.py)."""

from __future__ import annotations

import pytest

from clustersim.frameworks import load_framework
from clustersim.memory import evidence
from clustersim.parallel.layout import ParallelLayout
from tests.conftest import preset
from validation.memory_table import ALLOCATOR_METRICS, residual_quantiles, rows


@pytest.fixture(scope="module")
def table():
    return rows()


def test_interval_constants_are_the_table_residuals(table):
    """evidence.py holds the 10th/90th percentiles of published / predicted: recompute them."""
    assert residual_quantiles(table) == (evidence.RESIDUAL_Q10, evidence.RESIDUAL_Q90)


def test_every_outcome_is_predicted(table):
    """Runs that ran are predicted to fit (or tight); runs that ran out of memory not to fit."""
    bad = [(r.run["id"], r.run["outcome"], r.report.verdict) for r in table if not r.outcome_ok and r.explained]
    assert not bad
    # a run marked unexplained is one the prediction still gets wrong: once it does not, drop the mark
    assert all(not r.outcome_ok for r in table if not r.explained)
    assert any(r.run["outcome"] == "oom" for r in table) and any(r.run["outcome"] == "ran" for r in table)


def test_measured_peaks_within_ten_percent(table):
    measured = [r for r in table if r.residual is not None and r.metric in ALLOCATOR_METRICS]
    assert len(measured) >= 6
    far = [(r.run["id"], round(r.residual, 3)) for r in measured if abs(r.residual - 1) > 0.10]
    assert not far


def test_no_evidence_widens_the_interval():
    layout = ParallelLayout(dp=8)
    model = preset("llama2-7b")
    lo, hi = evidence.interval_factors(model, layout, load_framework("megatron-core"))
    wlo, whi = evidence.interval_factors(model, layout, load_framework("deepspeed"))
    assert wlo < lo <= 1.0 <= hi < whi
    clo, chi = evidence.interval_factors(model, ParallelLayout(dp=4, cp=2), load_framework("megatron-core"))
    assert (clo, chi) == (wlo, whi)
