"""`schedule: gpipe` with pp = 1 runs as 1F1B (clustersim.parallel.layout.pipeline_schedule): no
framework runs GPipe's all-forwards-then-all-backwards order without a pipeline (Megatron-LM
megatron/core/pipeline_parallel/schedules.py forward_backward_no_pipelining; torchtitan/train.py
forward_backward_step, "Non-PP forward / backward"). It had been priced as GPipe: the same pp 1
dp 8 Llama 3 8B layout with 8 micro-batches at 5.7706 s took 103.9 GiB as 1f1b and 417.4 GiB
(does not fit) as gpipe, and Mixtral 8x7B with the EP overlap ran without its overlapped pairs
(1.4920 s, 105.3 GiB instead of 1.6038 s, 48.7 GiB)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from clustersim import api
from clustersim.parallel.layout import ParallelLayout, pipeline_schedule
from clustersim.scenario import scenario_from_dict
from clustersim.sweep.space import SearchSpace, Shape, schedule_counts, schedule_options

ROOT = Path(__file__).resolve().parents[2]


def _llama(schedule: str, pp: int = 1) -> dict:
    return {"name": "gpipe-pp1", "model": {"preset": "llama3-8b"}, "cluster": {"preset": "hgx-h200", "nodes": 1},
            "parallel": {"tp": 1, "pp": pp, "dp": 8 // pp, "micro_batch": 1, "global_batch": 64, "zero_stage": 1,
                         "recompute": "none", "schedule": schedule},
            "training": {"dtype": "bf16"}}


def test_the_rule() -> None:
    assert pipeline_schedule("gpipe", 1) == "1f1b"
    assert pipeline_schedule("gpipe", 2) == "gpipe"
    assert pipeline_schedule("1f1b", 1) == "1f1b"
    assert ParallelLayout(schedule="gpipe", pp=1).schedule == "1f1b"
    assert ParallelLayout(schedule="gpipe", pp=4).schedule == "gpipe"
    assert replace(ParallelLayout(schedule="gpipe", pp=4), pp=1).schedule == "1f1b"   # every construction


def test_gpipe_at_pp1_is_priced_as_1f1b_with_a_note() -> None:
    one, gp = scenario_from_dict(_llama("1f1b")), scenario_from_dict(_llama("gpipe"))
    assert gp.parallel == one.parallel and gp.parallel.schedule == "1f1b"
    assert any("gpipe with pp 1" in n and "1f1b" in n for n in gp.notes)
    assert not any("gpipe" in n for n in one.notes)
    a, b = api.estimate(one), api.estimate(gp)
    assert b.step_time_s == a.step_time_s
    assert b.memory.peak_bytes_per_gpu == a.memory.peak_bytes_per_gpu   # was 417.4 GiB against 103.9
    assert b.memory.verdict == "fits"
    # with a pipeline GPipe stays GPipe: all micro-batches in flight, more memory than 1F1B
    assert scenario_from_dict(_llama("gpipe", pp=2)).parallel.schedule == "gpipe"


def test_ep_overlap_at_pp1_runs_its_pairs_under_gpipe_too() -> None:
    d = yaml.safe_load((ROOT / "scenarios/mixtral_8x7b_h100x64.yaml").read_text())
    d["parallel"].update(overlap_moe_expert_parallel_comm=True, global_batch=128)
    runs = {}
    for schedule in ("1f1b", "gpipe"):
        d["parallel"]["schedule"] = schedule
        runs[schedule] = api.estimate(scenario_from_dict(d))
    assert runs["gpipe"].step_time_s == runs["1f1b"].step_time_s   # was 1.4920 s against 1.6038 s
    assert runs["gpipe"].memory.peak_bytes_per_gpu == runs["1f1b"].memory.peak_bytes_per_gpu


def test_the_sweep_never_lists_gpipe_without_a_pipeline() -> None:
    # `--fix parallel.schedule=gpipe` had listed pp 1 "gpipe" rows priced with the phantom memory
    only_gpipe = SearchSpace(schedules=("gpipe",))
    flat, piped = Shape(tp=1, cp=1, pp=1, dp=8), Shape(tp=1, cp=1, pp=2, dp=4)
    assert schedule_options(flat, 8, 32, only_gpipe) == []
    assert schedule_counts(flat, 8, 32, only_gpipe) == {}
    assert schedule_options(piped, 8, 32, only_gpipe) == [("gpipe", 1)]
    assert schedule_counts(piped, 8, 32, only_gpipe) == {"gpipe": 1}
