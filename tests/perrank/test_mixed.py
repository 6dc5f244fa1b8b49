"""Mixed GPUs in one job: the balancing functions by hand, the shipped A100 + H100 scenario, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clustersim.api import SWEEP_EVALUATORS, estimate, simulate
from clustersim.errors import InputError
from clustersim.parallel.balance import balance_layers, balance_micro_batches, check_layers_per_stage
from clustersim.scenario import apply_overrides, load_scenario, read_scenario_dict, scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "scenarios" / "llama3_70b_a100_h100_mixed.yaml"


def test_layers_go_to_the_faster_stages() -> None:
    # 10 layers, a layer takes 2 s on stage 0 and 1 s on stage 1: (n0, n1) = (3, 7) gives
    # max(6, 7) = 7; (4, 6) gives 8, (2, 8) gives 8. So (3, 7).
    assert balance_layers(10, [2.0, 1.0], [0.0, 0.0]) == (3, 7)
    # equal GPUs, the last stage also runs a 1.5-layer output head: it gets fewer layers; (4, 5, 3) and
    # (5, 4, 3) both reach max(5, 4.5) = 5, ties go to the middle stage (as stage_layers does)
    assert balance_layers(12, [1.0, 1.0, 1.0], [0.0, 0.0, 1.5]) == (4, 5, 3)
    # interleaved (v = 2): rank totals balanced (4 slow, 8 fast: 8 vs 8), then split over the chunks;
    # stage order chunk * pp + rank: (rank 0 chunk 0, rank 1 chunk 0, rank 0 chunk 1, rank 1 chunk 1)
    assert balance_layers(12, [2.0, 1.0], [0.0, 0.0], virtual_stages=2) == (2, 4, 2, 4)
    # every stage keeps a layer per chunk even when it is very slow
    assert balance_layers(6, [100.0, 1.0, 1.0], [0.0, 0.0, 0.0]) == (1, 3, 2)


def test_micro_batches_go_to_the_faster_replicas() -> None:
    # replica 1 is twice as slow per micro-batch; pp = 1: m0 + m1 = 9 with max(m0 x 1, m1 x 2)
    # smallest at (6, 3): 6 = 6
    assert balance_micro_batches(9, [1.0, 2.0], pp=1) == (6, 3)
    # with pp = 4 the (m + pp - 1) fill counts: m0 + 3 = 2 (m1 + 3) -> (11, 4): 14 vs 14
    assert balance_micro_batches(15, [1.0, 2.0], pp=4) == (11, 4)
    # the interleaved schedule needs multiples of pp
    assert balance_micro_batches(16, [1.0, 3.0], pp=4, step=4) == (12, 4)
    with pytest.raises(InputError):
        balance_micro_batches(3, [1.0, 1.0], pp=4, step=4)


def test_an_explicit_split_is_checked() -> None:
    assert check_layers_per_stage([3, 5], 8, 2) == (3, 5)
    # the first and the last stage may hold no layer (only the embedding, or only MTP and the loss:
    # Megatron's --pipeline-model-parallel-layout "Et|(tt|)*30mL")
    assert check_layers_per_stage([8, 0], 8, 2, pp=1) == (8, 0)           # one rank, two chunks
    assert check_layers_per_stage([0, 4, 2, 2], 8, 4, pp=2) == (0, 4, 2, 2)
    # ... and so may a whole rank's, where the rank holds the embedding or the loss (the rule of a
    # framework split, clustersim.parallel.split.empty_ranks: pipeline_layout "Et*8|L")
    assert check_layers_per_stage([8, 0], 8, 2, pp=2) == (8, 0)
    assert check_layers_per_stage([0, 4, 0, 4], 8, 4, pp=2) == (0, 4, 0, 4)
    # ... but not when that leaves a pipeline rank holding nothing
    for bad, stages, pp in (([3, 4], 2, 2), ([8], 2, 2), ([4, 0, 4], 3, 3), ([-1, 9], 2, 2), ([4, 0, 0, 4], 4, 4),
                            ([4, 0, 4, 0, 0, 0], 6, 3)):
        with pytest.raises(InputError) as err:
            check_layers_per_stage(bad, 8, stages, pp)
        assert err.value.field == "parallel.layers_per_stage"


def test_the_balanced_split_beats_the_even_split_in_the_simulator() -> None:
    balanced = simulate(load_scenario(MIXED))
    even = simulate(load_scenario(MIXED, ["parallel.balance=even"]))
    split = balanced.to_json()["heterogeneous"]
    assert split["stage_gpus"] == ["a100-sxm-80gb"] * 2 + ["h100-sxm-80gb"] * 2
    layers = split["layers_per_stage"]
    assert sum(layers) == 80 and layers[0] < 20 < layers[3]   # the H100 stages take more layers
    assert even.to_json()["heterogeneous"]["layers_per_stage"] == [20, 20, 20, 20]
    assert balanced.step_time_s < 0.8 * even.step_time_s
    assert balanced.memory.fits
    # the closed form agrees on the order and, with nothing shared, nearly on the time
    closed = estimate(load_scenario(MIXED))
    assert closed.step_time_s < estimate(load_scenario(MIXED, ["parallel.balance=even"])).step_time_s
    assert math.isclose(closed.step_time_s, balanced.step_time_s, rel_tol=0.02)


def test_replicas_on_different_gpus_get_micro_batches_to_their_speed() -> None:
    # no pipeline: replicas 0-15 on the A100 nodes, 16-31 on the H100 nodes
    over = ["model.preset=llama3-8b", "parallel.pp=1", "parallel.dp=32", "parallel.global_batch=256"]
    balanced = simulate(load_scenario(MIXED, over))
    even = simulate(load_scenario(MIXED, [*over, "parallel.balance=even"]))
    mbs = balanced.to_json()["heterogeneous"]["micro_batches_per_replica"]
    assert sum(mbs) == 256 and len(set(mbs[:16])) == 1 and len(set(mbs[16:])) == 1 and mbs[0] < 8 < mbs[16]
    assert balanced.step_time_s < 0.8 * even.step_time_s
    assert balanced.to_json()["mfu"] > even.to_json()["mfu"]


def _raw(*settings: str) -> dict:
    return apply_overrides(read_scenario_dict(MIXED), list(settings))


@pytest.mark.parametrize("settings, field", [
    (["cluster.preset=dgx-h100"], "cluster.preset"),
    (["cluster.nodes=32"], "cluster.nodes"),
    (["cluster.groups=[]"], "cluster.groups"),
    (["cluster.groups=[{preset: dgx-a100, nodes: 16, gpus_per_node: 4}, {preset: dgx-h100, nodes: 32}]"],
     "cluster.groups"),
    (["cluster.groups=[{preset: nope, nodes: 16}, {preset: dgx-h100, nodes: 16}]"], "cluster.groups.0.preset"),
    (["cluster.groups=[{preset: dgx-a100, nodes: 16, colour: red}]"], "cluster.groups.0.colour"),
    (["training.dtype=fp8"], "training.dtype"),                       # A100 has no fp8
    (["faults.slow_links=[{node: 40, nic: 0, speed: 0.5}]"], "faults.slow_links.0.node"),
])
def test_bad_mixed_clusters_are_input_errors_naming_the_field(settings: list[str], field: str) -> None:
    with pytest.raises(InputError) as err:
        scenario_from_dict(_raw(*settings))
    assert err.value.field == field, err.value


def test_compare_refuses_mixed_clusters_and_faults(tmp_path) -> None:
    from clustersim.sweep.compare_rows import compare_rows

    faulty = tmp_path / "faulty.yaml"
    faulty.write_text(json.dumps({**read_scenario_dict(ROOT / "scenarios" / "llama3_8b_h200x8.yaml"),
                                  "faults": {"slow_gpus": [{"rank": 1, "speed": 0.5}]}}))
    for path, field in ((MIXED, "cluster.groups"), (faulty, "faults")):
        with pytest.raises(InputError) as exc:
            compare_rows(str(path), (), ["dgx-h100"], None, 1e12, {}, "serial", None, None, 1,
                         evaluators=SWEEP_EVALUATORS)
        assert exc.value.field == field


def test_an_unknown_group_key_lists_the_group_keys_not_the_cluster_keys() -> None:
    with pytest.raises(InputError) as err:
        scenario_from_dict(_raw("cluster.groups=[{preset: dgx-a100, nodes: 16, colour: red}]"))
    assert err.value.choices == ("preset", "nodes", "gpu", "gpus_per_node", "scale_up", "scale_out",
                                 "nics_per_node", "pcie", "host_link")


def test_every_lane_of_rank_classes_is_named_in_the_trace_and_the_page() -> None:
    """A mixed cluster at pp 1 has two rank classes: the trace named only process 0 (7,803 events on
    an unnamed process 1), and the HTML lanes of classes said 'stage 0', 'stage 1' at pp 1."""
    from pathlib import Path

    from clustersim.api import simulate_with_timeline
    from clustersim.html.timeline_data import timeline_data
    from clustersim.scenario import load_scenario
    from clustersim.trace import trace_events
    path = Path(__file__).resolve().parents[2] / "scenarios" / "llama3_70b_a100_h100_mixed.yaml"
    sc = load_scenario(path, ["parallel.pp=1", "parallel.dp=32", "parallel.global_batch=64"])
    report, result = simulate_with_timeline(sc, record=True)
    events = trace_events(result.timeline, sc, report.per_rank)["traceEvents"]
    named = {e["pid"] for e in events if e.get("name") == "process_name"}
    used = {e["pid"] for e in events if e.get("ph") == "X"}
    assert used and used <= named and len(used) == 2
    lanes = timeline_data(result.timeline.segments, report.step_time_s, pp=sc.parallel.pp).lanes
    assert any(name.startswith("class 1 stage 0") for name in lanes) and not any("stage 1" in n for n in lanes)
