"""The arithmetic of `clustersim compare`, checked by hand, and the hardware ordering."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim import api
from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.scenario import load_scenario
from clustersim.sweep.compare import parse_list, parse_prices, parse_tokens, scenario_on, train_cost


@pytest.mark.parametrize("text,tokens", [("1T", 1e12), ("300B", 3e11), ("2.5M", 2.5e6), ("7K", 7e3), ("1e9", 1e9),
                                         ("1500", 1500.0), ("1t", 1e12), (" 15 T ", 15e12)])
def test_parse_tokens(text, tokens):
    assert parse_tokens(text) == tokens


# 0.5 and 42 tokens: fewer than one step trains (below MIN_TOKENS, 1K); read as a time to train 0.5 tokens
@pytest.mark.parametrize("text", ["", "T", "1X", "-1T", "0", "one", "1TT", "nan", "0.5", "42"])
def test_parse_tokens_rejects(text):
    with pytest.raises(InputError, match="--tokens"):
        parse_tokens(text)


@pytest.mark.parametrize("text,option", [("dgx-h100,dgx-h100", "--clusters"), ("8,8", "--gpus"),
                                         ("16,016", "--gpus"), ("2, +2", "--nodes")])
def test_a_repeated_cluster_or_size_is_refused(text, option):
    """Each gave the same row twice, ranked 1 and 2."""
    with pytest.raises(InputError, match="repeated"):
        parse_list(text, option, int if option != "--clusters" else str)


def test_a_size_repeated_in_other_digits_exits_2_naming_the_option(capsys) -> None:
    """16,016 ran and ranked 16 GPUs twice: the repeat was looked for in the text, not the counts."""
    from clustersim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["compare", "--clusters", "dgx-h100", "--gpus", "16,016", "--json", "--no-progress"])
    assert exc.value.code == 2
    assert "--gpus: got '16,016'; allowed: each item once (16 repeated)" in capsys.readouterr().err


def test_train_cost_by_hand():
    # 1e12 tokens at 2e5 tokens/s: 1e12 / 2e5 = 5e6 s (57.9 days);
    # 1024 GPUs * 5e6 s / 3600 = 1,422,222.2 GPU-hours; at $2.00: $2,844,444.4
    c = train_cost(1e12, 2e5, 1024, 2.0)
    assert c.time_to_train_s == pytest.approx(5e6)
    assert c.gpu_hours == pytest.approx(1024 * 5e6 / 3600)
    assert c.gpu_hours == pytest.approx(1_422_222.222, rel=1e-9)
    assert c.cost_usd == pytest.approx(2_844_444.444, rel=1e-9)


def test_parse_prices():
    clusters = ["dgx-a100", "dgx-h100"]
    assert parse_prices(None, clusters) == {}
    assert parse_prices("2.5", clusters) == {"dgx-a100": 2.5, "dgx-h100": 2.5}
    assert parse_prices("dgx-h100=3, dgx-a100=1.5", clusters) == {"dgx-h100": 3.0, "dgx-a100": 1.5}
    for bad in ("abc", "dgx-a100=abc", "dgx-a100=-1", "hgx-h200=3", "=2", "dgx-a100",
                "dgx-a100=3,dgx-a100=4"):   # priced twice: the last price was taken silently
        with pytest.raises(InputError, match="--price-per-gpu-hour"):
            parse_prices(bad, clusters)


def test_profile_prices_are_set():
    for preset in ("dgx-a100", "dgx-h100", "hgx-h200"):
        assert load_cluster(preset, 1).gpu.price_per_gpu_hour_usd > 0


def test_same_layout_h200_at_least_h100_faster_than_a100():
    """Same model and layout on the three presets: tokens/s per GPU H200 >= H100 > A100."""
    s = load_scenario(None, ["model.preset=megatron-7.5b", "cluster.nodes=2", "parallel.tp=4", "parallel.pp=2",
                             "parallel.dp=2", "parallel.global_batch=32", "parallel.recompute=selective"])
    tps = {}
    for preset in ("dgx-a100", "dgx-h100", "hgx-h200"):
        sc = scenario_on(s, load_cluster(preset, 2))
        tps[preset] = api.simulate(sc).tokens_per_s / sc.cluster.num_gpus
    assert tps["hgx-h200"] >= tps["dgx-h100"] > tps["dgx-a100"]


def test_fp8_on_a100_is_refused():
    s = load_scenario(None, ["training.dtype=fp8"])
    with pytest.raises(InputError, match="training.dtype"):
        scenario_on(replace(s), load_cluster("dgx-a100", 2))


def test_cluster_size_gives_every_cluster_the_same_gpus():
    from clustersim.sweep.compare import ClusterSize, cluster_size, compare_cluster

    assert cluster_size("dgx-h100", 512) == ClusterSize(64)
    # 512 is no multiple of an NVL72 rack: 8 racks of 64 GPUs (16 of 18 trays), NVLink among the 64
    size = cluster_size("gb200-nvl72", 512)
    assert (size.nodes, size.scale_up_domain) == (128, 64) and "8 x 64 GPUs" in size.note
    cluster = compare_cluster("gb200-nvl72", size)
    assert (cluster.num_gpus, cluster.gpus_per_domain) == (512, 64)
    assert cluster_size("gb200-nvl72", 576) == ClusterSize(144)           # whole racks
    assert cluster_size("gb200-nvl72", 64) == ClusterSize(16)             # a partition of one rack
    assert compare_cluster("gb200-nvl72", cluster_size("gb200-nvl72", 64)).gpus_per_domain == 64
    size = cluster_size("mi300x", 20)                                     # whole nodes, said so
    assert size.nodes == 3 and size.note == "24 GPUs, not 20: whole nodes of 8"
    # 76 GPUs split only into racks of 4 (19 x 4): the next count that splits well, said so
    size = cluster_size("gb200-nvl72", 76)
    assert (size.nodes, size.scale_up_domain) == (20, 40) and size.note.startswith("80 GPUs, not 76")


def test_cluster_size_by_nodes_refuses_what_does_not_split_naming_the_counts_that_do():
    from clustersim.sweep.compare import cluster_size

    assert cluster_size("gb200-nvl72", nodes=64).scale_up_domain == 64    # 256 GPUs: 4 racks of 64
    assert cluster_size("gb200-nvl72", nodes=10).scale_up_domain == 0     # 40 GPUs of one rack
    with pytest.raises(InputError) as exc:
        cluster_size("gb200-nvl72", nodes=19)
    assert exc.value.field == "--nodes" and exc.value.value == 19
    assert exc.value.allowed == ("for gb200-nvl72 (4 GPUs per node, 72-GPU scale-up domains): 1 to 18 nodes (part "
                                 "of one domain), or a node count whose GPUs split into equal parts of 36 to 72 GPUs "
                                 "per domain; nearest: 18 or 20")


def test_run_interval_scales_with_the_step_time():
    from clustersim.sweep.compare import rank_rows, run_interval

    row = {"step_time_s": 2.0, "time_to_train_s": 100.0, "cost_usd": 50.0, "energy_kwh": 10.0}
    iv = run_interval(0.8, 1.5, 3.0, row)
    assert iv == {"level": 0.8, "step_time_s": [1.5, 3.0], "time_to_train_s": [75.0, 150.0],
                  "cost_usd": [37.5, 75.0], "energy_kwh": [7.5, 15.0]}
    rows = [{"cluster": "b", "nodes": 1, "time_to_train_s": 2, "cost_usd": 1, "energy_kwh": 3},
            {"cluster": "a", "nodes": 1, "time_to_train_s": 1, "cost_usd": 2, "energy_kwh": 3}]
    assert [r["cluster"] for r in rank_rows(rows, "time")] == ["a", "b"]
    assert [r["cluster"] for r in rank_rows(rows, "cost")] == ["b", "a"]
    assert [r["cluster"] for r in rank_rows(rows, "energy")] == ["a", "b"]   # tie: by name
    with pytest.raises(InputError, match="--rank-by"):
        rank_rows(rows, "speed")


def test_interval_widens_for_unmeasured_gemms():
    """clustersim.uncertainty widens the band for a GPU generation without measured runs, more so
    without a public GEMM measurement (H20 has none, B200 has stas00's MAMF)."""
    from clustersim.uncertainty import step_interval

    b200 = step_interval(load_scenario(None, ["cluster.preset=dgx-b200"]))
    h20 = step_interval(load_scenario(None, ["cluster.preset=hgx-h20"]))
    assert h20.hi_factor / h20.lo_factor > b200.hi_factor / b200.lo_factor
    assert any("h20" in why for why in h20.why)


def test_scenario_on_moves_the_default_recipe_with_the_gpu():
    s = load_scenario(None, ["training.dtype=fp8"])                 # H100: per-tensor delayed scaling
    assert scenario_on(s, load_cluster("dgx-b200", 2)).training.recipe == "mxfp8"
    blockwise = load_scenario(None, ["training.dtype=fp8", "training.fp8_recipe=blockwise"])
    assert scenario_on(blockwise, load_cluster("dgx-b200", 2)).training.recipe == "blockwise"
    with pytest.raises(InputError, match="training.dtype"):
        scenario_on(load_scenario(None, ["cluster.preset=dgx-b200", "training.dtype=fp4"]), load_cluster("dgx-h100", 2))


def test_a_tight_best_layout_says_so(tmp_path) -> None:
    """llama3-70b at 8k on 16 H100: the row read as a normal answer (days, cost) although its
    predicted peak, 81.9 GiB, exceeds the GPU's 79.6 GiB; the JSON rows had no memory verdict."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    f = tmp_path / "s.yaml"
    f.write_text("model: {preset: llama3-70b, seq_len: 8192}\ncluster: {preset: dgx-h100, nodes: 2}\n"
                 "parallel: {tp: 8, pp: 2, dp: 1, micro_batch: 1, global_batch: 16, recompute: full}\n")
    root = Path(__file__).resolve().parents[2]
    args = [sys.executable, "-m", "clustersim", "compare", str(f), "--clusters", "dgx-h100", "--tokens", "10B",
            "--no-progress"]
    p = subprocess.run([*args, "--json"], cwd=root, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["rows"][0]
    assert row["memory_verdict"] == "tight" and row["free_bytes_per_gpu"] < 0
    p = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=600)
    assert "dgx-h100: no layout fits for certain" in " ".join(p.stdout.split())


def test_set_on_a_searched_dimension_constrains_every_cluster() -> None:
    """`compare --set parallel.tp=2` (and api.compare_frame(overrides=...)) returned the same rows as
    without it, and took `parallel.tp=x` with exit 0: the search left the template's value."""
    frame = api.compare_frame(None, ["dgx-h100"], tokens=1e9, overrides=["parallel.tp=2"], executor="serial")
    assert set(frame["best_layout.tp"]) == {2}
    with pytest.raises(InputError) as err:
        api.compare_frame(None, ["dgx-h100"], tokens=1e9, overrides=["parallel.tp=x"], executor="serial")
    assert err.value.field == "--set"


def test_a_set_that_leaves_no_layout_is_named_by_its_key() -> None:
    """`compare --clusters hgx-h200,dgx-h100 --set parallel.cp=3` said "--clusters: got 'hgx-h200'" and
    `sweep --set parallel.cp=3` "--fix: got 'cp=3'": neither was what the user gave."""
    job = ["scenarios/llama3_8b_h200x8.yaml"]
    with pytest.raises(InputError) as err:
        api.compare_frame(*job, ["hgx-h200", "dgx-h100"], tokens=1e9, overrides=["parallel.cp=3"], executor="serial")
    assert err.value.field == "--set parallel.cp" and err.value.value == 3
    assert "some valid layout" in err.value.allowed
    from clustersim.sweep.constraints import parse_constraints
    s = load_scenario(job[0])
    assert parse_constraints(s.model, ("tp=2",), ("pp=2",), ("parallel.cp=3",)).named() == ("--set/--fix/--max",
                                                                                              "cp=3, tp=2, pp<=2")
    assert parse_constraints(s.model, (), ("pp=2",)).named() == ("--max parallel.pp", 2)


def test_duration_column_reads_different_times_differently() -> None:
    """A fixed one-decimal day read "0.1" for 1.5 and 3.3 hours: the unit follows the shortest
    value (at least 1 of it) and the decimals give it 3 significant digits."""
    from clustersim.html.fragments import duration_column

    hours = duration_column([1.52 * 3600, 3.32 * 3600])
    assert (hours.unit, hours.fmt(1.52 * 3600), hours.fmt(3.32 * 3600)) == ("hours", "1.52", "3.32")
    days = duration_column([8.5 * 86400, 22.4 * 86400])
    assert (days.unit, days.fmt(8.5 * 86400), days.fmt(22.4 * 86400)) == ("days", "8.50", "22.40")
    assert duration_column([150 * 86400]).fmt(150 * 86400) == "150.0"
    assert duration_column([90.0]).unit == "minutes" and duration_column([30.0]).unit == "seconds"


def _row(cluster: str, lo: float, hi: float, validated: bool = True, why: tuple[str, ...] = ()) -> dict:
    mid = (lo + hi) / 2
    return {"cluster": cluster, "gpus": 8, "interval": {"level": 0.8, "time_to_train_s": [lo, hi],
                                                       "cost_usd": [lo, hi], "energy_kwh": [lo, hi],
                                                       "step_time_s": [lo, hi]},
            "time_to_train_s": mid, "interval_regime": "3d/x", "interval_validated": validated,
            "interval_widened_for": list(why), "interval_evidence_runs": 0 if why else 5}


def test_compare_says_which_rows_overlap_the_best_and_which_are_not_validated() -> None:
    """The table ranked rows whose intervals overlap without saying so, and never said that an
    interval rests on no measured run; the lines are the sweep's (clustersim.sweep.verdict)."""
    from clustersim.cli.compare_cmd import ranking_lines

    rows = [_row("a", 1.0, 2.0), _row("b", 1.5, 3.0), _row("c", 2.5, 4.0, False, ("no measured run on c GPUs",))]
    assert ranking_lines(rows, "time") == [
        "row #2 (b) is indistinguishable from #1 (a) within their 80% intervals (the time-to-train intervals overlap)",
        "#3 (c)'s regime (3d/x) is NOT validated: no measured run on c GPUs"]
    assert ranking_lines(rows[::2], "cost")[0] == "#1 (a) is cheaper than every other listed row beyond their 80% intervals"


def test_compare_table_reads_hours_and_the_interval_verdict(capsys, tmp_path) -> None:
    """1B tokens on 8 GPUs: every row read "0.1 (0.1-0.1)" days (also on the HTML page) although the
    step times differ 2.2x."""
    from pathlib import Path

    from clustersim.cli import main

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "llama3_8b_h200x8.yaml"
    page = tmp_path / "c.html"
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(scenario), "--clusters", "hgx-h200,dgx-b200,mi300x", "--tokens", "1B", "--no-progress",
              "--executor", "serial", "--html", str(page)])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "hours" in out and "0.1 (0.1-0.1)" not in out
    assert "hours</th>" in page.read_text()
    assert "#1 (dgx-b200) is faster than every other listed row beyond their 80% intervals" in out
    assert "(mi300x)'s regime (3d/mi300x) is NOT validated:" in out and "no measured run on mi300x GPUs" in out


def test_compare_table_shows_a_stated_layout_whole() -> None:
    """A best layout that Megatron-Core builds only from --pipeline-model-parallel-layout is part
    of the row's label; the table cut it at the column's width ("...t*3|..."), which reads as
    another split. It folds onto the next lines whole."""
    from rich.console import Console

    from clustersim.cli.compare_cmd import compare_table

    layout = "Et*2|" + "|".join(["t*3"] * 25) + "|t*2L"
    row = {**_row("dgx-b200", 1.0, 2.0), "rank": 1, "size_note": "", "step_time_s": 3.43, "mfu": 0.51,
           "cost_usd": 1.5, "energy_kwh": 1.5, "price_per_gpu_hour_usd": 5.25, "facility_power_kw": 1085.0,
           "best_layout": {"tp": 2, "pp": 2, "dp": 64, "cp": 2, "micro_batch": 1, "zero_stage": 1,
                           "recompute": "none", "sequence_parallel": False, "schedule": "interleaved-1f1b",
                           "virtual_stages": 15, "pipeline_layout": layout}}
    console = Console(width=170, record=True)
    console.print(compare_table([row], 1e12, "time"))
    cells = "".join(line.split("│")[4].strip() for line in console.export_text().splitlines() if line.count("│") > 4)
    assert layout in cells
