"""A --set that changes the job can leave the scenario's own layout invalid; the sweep and compare
search the layout anyway, so they take a stand-in template instead of refusing
(clustersim.sweep.template). Before, `sweep --set parallel.global_batch=12` on the 8-GPU scenario
exited 2 ("parallel.micro_batch ... 12/8 = 1.5") although tp 2 x dp 4 runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.errors import InputError
from clustersim.scenario import apply_overrides, read_scenario_dict
from clustersim.sweep.template import load_template

ROOT = Path(__file__).resolve().parents[2]
S8 = ROOT / "scenarios" / "llama3_8b_h200x8.yaml"


def test_an_invalid_own_layout_gives_a_stand_in_that_is_not_called_the_scenarios() -> None:
    base, own = load_template(apply_overrides(read_scenario_dict(S8), ["parallel.global_batch=12"]))
    assert not own and base.parallel.global_batch == 12 and 12 % (base.parallel.dp * base.parallel.micro_batch) == 0
    base, own = load_template(read_scenario_dict(S8))
    assert own


@pytest.mark.parametrize("sets,field", [(["parallel.global_batch=-1"], "parallel.global_batch"),
                                        (["model.layers=0"], "model.layers")])
def test_errors_that_are_not_the_layouts_still_stop(sets: list[str], field: str) -> None:
    with pytest.raises(InputError) as err:
        load_template(apply_overrides(read_scenario_dict(S8), sets))
    assert err.value.field == field


def test_sweep_and_compare_answer_for_a_new_global_batch() -> None:
    for command in (["sweep", str(S8), "--top", "2"], ["compare", str(S8), "--clusters", "dgx-h100"]):
        p = subprocess.run([sys.executable, "-m", "clustersim", *command, "--set", "parallel.global_batch=12",
                            "--json", "--executor", "serial"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        rows = out["top"] if command[0] == "sweep" else out["rows"]
        layout = rows[0]["parallel" if command[0] == "sweep" else "best_layout"]
        assert layout["global_batch"] == 12 and 12 % (layout["dp"] * layout["micro_batch"]) == 0
        if command[0] == "compare":
            assert rows[0]["scenario_layout"] is None   # the stand-in is not reported as the scenario's


def test_sweep_gpus_on_nvl72_split_as_compare_splits_them() -> None:
    """`sweep --gpus 80` on NVL72 racks failed naming cluster.scale_up_domain (got 72), a key the
    user never set, where compare runs the same count as 2 x 40. The sweep now sizes it the same
    way, and a count that splits into no equal parts of at least half a rack is --gpus's error."""
    import pytest

    from clustersim.errors import InputError
    from clustersim.hardware.load import load_cluster
    from clustersim.sweep.runner import resize_cluster

    rack = load_cluster("gb200-nvl72", 18)
    assert (resize_cluster(rack, 80).num_gpus, resize_cluster(rack, 80).scale_up_domain) == (80, 40)
    assert resize_cluster(rack, 144).scale_up_domain == 72
    with pytest.raises(InputError) as err:
        resize_cluster(rack, 84)
    assert err.value.field == "--gpus" and "nearest: 80 or 88" in err.value.allowed
