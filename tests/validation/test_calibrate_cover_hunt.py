"""`clustersim calibrate` and the runs on its profile, on what a hunt of the calibration path found:
a band whose low end went past the GPUs' peak, configs and --set values that contradict the log,
messages naming options calibrate does not have, logs of one name (docs/calibration.md,
docs/uncertainty.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.report import step_at_peak_s
from clustersim.scenario import read_scenario_dict, scenario_from_dict
from tests.validation.test_validation_cli import _run  # the CLI run helper of the calibrate tests

DATA = Path(__file__).parent / "data" / "cut_logs"
LOG = DATA / "megatron_96gpu.log"


@pytest.fixture(scope="module")
def job71(tmp_path_factory) -> Path:
    from clustersim.cli import main
    out = tmp_path_factory.mktemp("job") / "job71.yaml"
    with pytest.raises(SystemExit) as exc:
        main(["import", "megatron-log", str(LOG), "--cluster", "dgx-h100", "--out", str(out)])
    assert exc.value.code == 0
    return out


def test_the_low_end_stops_at_the_floor_calibrate_refuses_below(job71, tmp_path, capsys):
    """Calibrated on a run 9 s long (the fit stops at the edge of its range and the band widens x5 to
    hold it), `run` printed MFU 4.2-110.6% (step low 0.3408 s) while calibrate refuses a measured
    0.2 s as faster than the model's FLOPs at the dense peak (0.3769 s). The low end now stops at
    that floor (report.step_at_peak_s)."""
    code, _, err = _run(["calibrate", "--run", f"{job71}=0.2", "--name", "fast", "--out", str(tmp_path / "f.yaml")],
                        capsys)
    assert code == 2 and "at the dense" in err
    profile = tmp_path / "e9.yaml"
    code, _, err = _run(["calibrate", "--run", f"{job71}=9", "--name", "e9", "--out", str(profile)], capsys)
    assert code == 0, err
    code, out, err = _run(["run", str(job71), "--profile", str(profile), "--set", "cluster.preset=e9", "--json"],
                          capsys)
    assert code == 0, err
    d = json.loads(out)
    floor_s = step_at_peak_s(scenario_from_dict(read_scenario_dict(str(job71))))
    assert d["interval"]["step_time_s"][0] == pytest.approx(floor_s, rel=1e-9)
    assert d["interval"]["mfu"][1] == pytest.approx(1.0, rel=1e-9)
    assert d["interval"]["step_time_s"][1] >= 9.0                     # still holds the run it was fitted to
