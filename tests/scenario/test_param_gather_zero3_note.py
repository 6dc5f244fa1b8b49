"""parallel.overlap_param_gather overlaps ZeRO-1/2's all-gather of the updated parameters
(clustersim.plan.data_parallel params_after_step); under ZeRO-3 the gathers follow the
implementation's prefetch and the field has no effect. Stated with zero_stage 3 it was taken
silently; the scenario's notes (run's text and --json "notes") now say so. Not refused: imports
write it."""

from __future__ import annotations

from clustersim import api
from clustersim.scenario import scenario_from_dict


def make(zero: int, **par):
    return scenario_from_dict({
        "framework": "deepspeed", "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
        "parallel": {"dp": 8, "micro_batch": 1, "global_batch": 64, "zero_stage": zero, "recompute": "full", **par},
        "training": {"dtype": "bf16"}})


def test_stated_with_zero3_the_notes_say_it_has_no_effect():
    for value in (True, False):
        sc = make(3, overlap_param_gather=value)
        assert any("overlap_param_gather" in n and "no effect" in n and "fsdp.prefetch" in n for n in sc.notes)
    assert not make(3).notes                                 # left out: nothing to say
    assert not make(2, overlap_param_gather=True).notes      # ZeRO-2: it applies


def test_the_run_json_carries_the_note_and_the_step_is_unchanged():
    on, off = api.estimate(make(3, overlap_param_gather=True)), api.estimate(make(3, overlap_param_gather=False))
    assert on.step_time_s == off.step_time_s
    assert any("overlap_param_gather" in n for n in on.to_json()["notes"])
    assert "notes" not in api.estimate(make(3)).to_json()
