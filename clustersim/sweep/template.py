"""The sweep's template: the scenario whose model, cluster and job a sweep or a comparison
searches the layouts of.

The loader checks the scenario's own layout with every rule, but a ``--set`` that changes the job
(``parallel.global_batch=12``, ``cluster.nodes=2``) can leave the layout it states invalid (dp 8
does not divide a global batch of 12; tp x pp x dp no longer equals the GPU count) although the
sweep searches the layout anyway. Then the template takes the first plain layout the loader
accepts (tp from 1 up, pp 1, dp derived, micro-batch 1, the scenario's other layout options kept)
and is not the user's own: ``own`` False, so no row is reported as the scenario's layout.
"""

from __future__ import annotations

from typing import Any

from clustersim.errors import InputError
from clustersim.scenario import Scenario, scenario_from_dict
from clustersim.sweep.constraints import SEARCHED

# layout fields that follow the degrees the template gives up (the sweep resets them too: runner.sweep_spec)
_WITH_THE_DEGREES = ("layers_per_stage", "first_stage_layers", "last_stage_layers", "pipeline_layout",
                     "hierarchical_cp_sizes")
_TP_TRIED = (1, 2, 4, 8, 16, 32, 64, 72)   # up to the largest scale-up domain a preset has (NVL72)


def load_template(raw: dict[str, Any]) -> tuple[Scenario, bool]:
    """(the template, whether its layout is the scenario's own); the loader's error when neither
    the scenario's layout nor any plain one loads (the error is then not about the layout)."""
    try:
        return scenario_from_dict(raw), True
    except InputError as err:
        if not err.field.startswith("parallel"):
            raise
        first = err
    kept = {k: v for k, v in (raw.get("parallel") or {}).items()
            if f"parallel.{k}" not in SEARCHED and k not in _WITH_THE_DEGREES}
    for tp in _TP_TRIED:
        try:
            return scenario_from_dict({**raw, "parallel": {**kept, "tp": tp, "pp": 1, "cp": 1, "micro_batch": 1}}), False
        except InputError:
            continue
    raise first
