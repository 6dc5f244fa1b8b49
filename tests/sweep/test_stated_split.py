"""A sweep row whose split Megatron-Core builds only from a flag states it as the row's
``pipeline_layout`` (clustersim.sweep.result.stated_split, over the importer's rule
clustersim.parallel.split.megatron_even_split_refusal), and the row runs as written with the
same step time and memory."""

from dataclasses import replace

from clustersim.api import estimate
from clustersim.parallel.pipeline import SCHEDULES
from clustersim.scenario import load_scenario
from clustersim.sweep.result import stated_split


def _key(pp, dp, sched="1f1b", v=1, tp=2):
    return (tp, 1, pp, dp, 1, 0, 1, 1, 0, 0, SCHEDULES.index(sched), v, 0)


def test_uneven_rows_state_their_layout():
    sc = load_scenario("scenarios/llama3_8b_h200x8.yaml")   # 32 layers
    assert stated_split(sc, _key(3, 4)) == {"pipeline_layout": "Et*11|t*11|t*10L"}
    assert stated_split(sc, _key(4, 1)) == {}
    assert stated_split(sc, _key(2, 2, "interleaved-1f1b", 16)) == {}
    assert "pipeline_layout" in stated_split(sc, _key(2, 2, "interleaved-1f1b", 32 // 2 // 2 * 2 - 1))


def test_stated_layout_runs_as_priced():
    sc = load_scenario("scenarios/llama3_8b_h200x8.yaml", ["parallel.tp=2", "parallel.pp=3", "parallel.dp=4",
                                                            "parallel.cp=1", "cluster.nodes=3"])
    with_layout = load_scenario("scenarios/llama3_8b_h200x8.yaml",
                                ["parallel.tp=2", "parallel.pp=3", "parallel.dp=4", "parallel.cp=1", "cluster.nodes=3",
                                 "parallel.pipeline_layout=Et*11|t*11|t*10L"])
    a, b = estimate(sc), estimate(with_layout)
    assert a.step_time_s == b.step_time_s and a.to_json()["memory"] == b.to_json()["memory"]


def test_torchtitan_rows_state_nothing():
    sc = load_scenario("scenarios/llama3_8b_h200x8.yaml")
    sc = replace(sc, framework=replace(sc.framework, name="torchtitan"))
    assert stated_split(sc, _key(3, 4)) == {}


def test_a_rows_label_and_html_page_state_its_layout():
    """The label that the verdict lines, the HTML page and compare's table print for a row carries
    its stated layout, so that the row can be run from what the page shows."""
    from clustersim.html.sweep_page import top_table
    from clustersim.sweep.verdict import layout_label

    sc = load_scenario("scenarios/llama3_8b_h200x8.yaml")
    p = {"tp": 2, "pp": 3, "dp": 4, "cp": 1, "micro_batch": 1, "zero_stage": 1, "recompute": "selective",
         "sequence_parallel": False, "schedule": "1f1b", "virtual_stages": 1, **stated_split(sc, _key(3, 4))}
    assert layout_label(p).endswith("1f1b layout Et*11|t*11|t*10L")
    row = {"rank": 1, "parallel": p, "step_time_s": 1.0, "mfu": 0.5, "tokens_per_s": 1.0, "peak_bytes_per_gpu": 2**30,
           "memory_verdict": "fits", "engine": "event",
           "interval": {"step_time_s": [0.9, 1.1], "regime": "3d/hopper", "validated": True}}
    assert "layout Et*11|t*11|t*10L" in top_table([row])


def test_the_readable_sweep_says_which_rows_run_with_which_layout() -> None:
    """The readable table marked a row '+layout' and never said which layout: a line under it per
    stated layout names its rows (and the JSON's verdict carries it)."""
    from clustersim.cli.sweep_cmd import stated_layout_lines

    rows = [{"rank": 1, "parallel": {"pipeline_layout": "Et*11|t*11|t*10L"}}, {"rank": 2, "parallel": {}},
            {"rank": 3, "parallel": {"pipeline_layout": "Et*11|t*11|t*10L"}},
            {"rank": 4, "parallel": {"pipeline_layout": "Et*8|t*8|t*8|t*8L"}}]
    lines = stated_layout_lines(rows)
    assert len(lines) == 2
    assert lines[0].startswith("#1, #3 +layout: parallel.pipeline_layout=Et*11|t*11|t*10L")
    assert lines[1].startswith("#4 +layout: parallel.pipeline_layout=Et*8|t*8|t*8|t*8L")
    assert stated_layout_lines(rows[1:2]) == []
