"""Recording the timeline (``--trace``, ``--html``) changes no number of the step: the recorded
model reports the plain model's result bit for bit (clustersim.engine.hybrid.Recorded), the event
engine's sums do not depend on whether it keeps segments (clustersim.engine.timeline.add_segment),
and a job without a pipeline reports no rounding noise as bubble (timeline.IDLE_ROUNDING)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.engine.event import EventEngine
from clustersim.engine.selector import timing_model
from clustersim.plan.plan_cache import PlanCache
from clustersim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


# pp 1 (the hybrid's closed form and simpy); pp 8 with collapsed periods; a plan the hybrid
# declines (torchtitan's FSDP: all in simpy); mixed GPUs (per-rank mode)
@pytest.mark.parametrize("name", ["megatron_16b_h100x192", "gpt3_175b_a100x1024", "llama2_13b_a100x64_torchtitan",
                                  "llama3_70b_a100_h100_mixed"])
def test_json_is_byte_identical_with_and_without_trace(name: str, tmp_path: Path) -> None:
    scenario = f"scenarios/{name}.yaml"
    plain = _run(scenario, "--json")
    assert _run(scenario, "--json", "--trace", str(tmp_path / "t.json")) == plain
    assert (tmp_path / "t.json").stat().st_size > 0


def test_json_with_faults_is_byte_identical_with_and_without_html(tmp_path: Path) -> None:
    faults = ("--set", "faults.slow_gpus=[{rank: 3, speed: 0.9}]")
    assert _run(*faults, "--json", "--html", str(tmp_path / "p.html")) == _run(*faults, "--json")


@pytest.mark.parametrize("name", ["llama3_70b_gb200x72", "llama3_70b_h800x256", "megatron_16b_h100x192"])
def test_event_engine_sums_alike_recorded_or_not(name: str) -> None:
    plan = PlanCache().step_plan(load_scenario(ROOT / "scenarios" / f"{name}.yaml"))
    a, b = EventEngine(record=False).time(plan), EventEngine(record=True).time(plan)
    assert (a.step_time_s, a.breakdown, a.rank_end_s, a.last_action_s) == \
        (b.step_time_s, b.breakdown, b.rank_end_s, b.last_action_s)
    assert b.timeline.segments and not a.timeline.segments


def test_no_pipeline_no_bubble() -> None:
    plan = PlanCache().step_plan(load_scenario(ROOT / "scenarios" / "megatron_16b_h100x192.yaml"))
    assert plan.pp == 1
    for engine, exact in (("event", False), ("event", True), ("analytical", False)):
        assert timing_model(engine, exact=exact).time(plan).breakdown["bubble"] == 0.0
    assert timing_model("event", record=True).time(plan).breakdown["bubble"] == 0.0
