"""The sweep searches only the layouts a scenario could state: a grid whose groups of one axis sit
differently on the nodes (tp 1 x dp 12 on nodes of 8) is refused by the loader (clustersim.parallel
.placement.axis_shape_for), so the sweep must leave it out rather than stop on it
(clustersim.sweep.space.shapes). Before this, ``clustersim sweep`` of the shipped 192-GPU scenario
exited 2 on its first such candidate."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from clustersim.api import estimate
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.space import SearchSpace, divisors, shapes

ROOT = Path(__file__).resolve().parents[2]
BASE = {"model": {"preset": "megatron-core-1.7b"}, "cluster": {"preset": "dgx-h100", "nodes": 3},
        "parallel": {"tp": 8, "pp": 1, "dp": 3, "micro_batch": 1, "global_batch": 48},
        "training": {"dtype": "bf16"}}


def _runs(tp: int, pp: int, dp: int) -> bool:
    raw = json.loads(json.dumps(BASE))
    raw["parallel"].update(tp=tp, pp=pp, dp=dp, sequence_parallel=tp > 1)
    try:
        estimate(scenario_from_dict(raw))
    except InputError as err:
        assert err.field == "parallel", err   # only the placement may refuse these grids
        return False
    return True


def test_shapes_are_exactly_the_grids_the_loader_times() -> None:
    sc = scenario_from_dict(BASE)
    listed = {(s.tp, s.pp, s.dp) for s in shapes(sc.model, sc.cluster, 48, SearchSpace()) if s.cp == 1}
    grids = [(tp, pp, 24 // (tp * pp)) for tp in divisors(24) for pp in divisors(24 // tp)
             if tp <= 8 and 48 % (24 // (tp * pp)) == 0 and pp <= sc.model.layers
             and sc.model.heads % tp == 0]
    refused = [g for g in grids if not _runs(*g)]
    assert (1, 2, 12) in refused and (1, 1, 24) not in refused   # the rule is not vacuous here
    assert listed == {g for g in grids if g not in refused}


def test_sweep_of_the_shipped_192_gpu_scenario_answers() -> None:
    p = subprocess.run([sys.executable, "-m", "clustersim", "sweep", "scenarios/megatron_16b_h100x192.yaml",
                        "--top", "3", "--json", "--executor", "serial"], cwd=ROOT, capture_output=True, text=True,
                       check=False)
    assert p.returncode == 0, p.stderr
    top = json.loads(p.stdout)["top"]
    assert len(top) == 3


@pytest.mark.parametrize("gpus", [24])
def test_every_listed_shape_runs(gpus: int) -> None:
    sc = scenario_from_dict(BASE)
    for s in shapes(sc.model, sc.cluster, 48, SearchSpace()):
        layout = replace(sc.parallel, tp=s.tp, cp=s.cp, pp=s.pp, dp=s.dp, sequence_parallel=s.tp > 1)
        assert estimate(replace(sc, parallel=layout)).step_time_s > 0   # an InputError here: a grid the loader refuses
