"""`clustersim compare` as a user meets it: a progress bar (and --no-progress), the same GPU count
on every cluster or a note on the row that differs, the token count as typed, its own messages."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from clustersim.api import SWEEP_EVALUATORS
from clustersim.cli import main
from clustersim.cli.progress import progress_bar
from clustersim.sweep.compare_rows import compare_rows

SMALL = ["--set", "model.preset=megatron-1.7b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
         "--set", "parallel.tp=2", "--set", "parallel.pp=2", "--set", "parallel.dp=2",
         "--set", "parallel.global_batch=16"]


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code), out.out, out.err


def test_table_title_tokens_as_typed_and_a_note_on_a_row_that_differs(capsys) -> None:
    code, out, err = _main(["compare", *SMALL, "--clusters", "dgx-a100", "--gpus", "12", "--tokens", "1T",
                            "--executor", "serial", "--no-progress"], capsys)
    assert code == 0, err
    assert "time to train 1T tokens" in out and "1e+12" not in out
    assert "16*" in out  # 12 GPUs are no whole 8-GPU nodes: the row says so under the table
    assert "* dgx-a100: 16 GPUs, not 12: whole nodes of 8" in out
    assert "━" not in err  # --no-progress: no bar


def test_rows_carry_the_request_and_report_progress() -> None:
    calls = []
    rows = compare_rows(None, tuple(SMALL[1::2]), ["dgx-a100"], None, 1e9, {}, "serial", None, None, 1, gpus=[8],
                        progress=lambda done, total, cluster: calls.append((done, total, cluster)),
                        evaluators=SWEEP_EVALUATORS).rows
    assert calls == [(0, 1, ""), (1, 1, "dgx-a100")]
    (row,) = rows
    assert (row["gpus"], row["gpus_requested"], row["size_note"]) == (8, 8, "")


def test_progress_bar_draws_on_a_terminal_and_not_elsewhere() -> None:
    buf = io.StringIO()
    with progress_bar(True, {"sweeps": "compare"}, "sweeps",
                      console=Console(file=buf, force_terminal=True, width=100)) as update:
        assert update is not None
        update("sweeps", 0, 5)
        update("sweeps", 5, 5)
    assert "compare" in buf.getvalue() and "5/5" in buf.getvalue() and "sweeps" in buf.getvalue()
    with progress_bar(True, console=Console(file=io.StringIO(), force_terminal=False)) as update:
        assert update is None  # a log file gets no bar
    with progress_bar(False, console=Console(file=io.StringIO(), force_terminal=True)) as update:
        assert update is None  # --no-progress


@pytest.mark.parametrize(("args", "message"), [
    (["--clusters", "gb200-nvl72", "--nodes", "19"],
     "error: --nodes: got 19; allowed: for gb200-nvl72 (4 GPUs per node, 72-GPU scale-up domains): 1 to 18 nodes"),
    (["--clusters", "dgx-a100,dgx-h10"], "error: --clusters: got 'dgx-h10' (did you mean 'dgx-h100'"),
])
def test_refusals_in_the_commands_own_words(args: list[str], message: str, capsys) -> None:
    code, out, err = _main(["compare", *SMALL, *args], capsys)
    assert code == 2 and err.startswith(message), err
    assert "Traceback" not in err and out == ""


def test_nodes_that_give_different_gpu_counts_are_noted() -> None:
    from clustersim.sweep.compare_rows import note_unequal_nodes

    rows = [{"cluster": "gb200-nvl72", "nodes": 18, "gpus": 72, "gpus_requested": None, "size_note": ""},
            {"cluster": "dgx-h100", "nodes": 18, "gpus": 144, "gpus_requested": None, "size_note": ""},
            {"cluster": "dgx-a100", "nodes": 4, "gpus": 32, "gpus_requested": None, "size_note": ""},
            {"cluster": "dgx-h100", "nodes": 4, "gpus": 32, "gpus_requested": None, "size_note": ""}]
    note_unequal_nodes(rows)
    assert rows[0]["size_note"].startswith("18 nodes of 4 GPUs (--nodes counts nodes")
    assert rows[1]["size_note"].startswith("18 nodes of 8 GPUs")
    assert rows[2]["size_note"] == rows[3]["size_note"] == ""  # the same GPUs: nothing to say


PART_FITS = ["--set", "model.preset=megatron-22b", "--set", "cluster.preset=dgx-a100", "--set", "cluster.nodes=1",
             "--set", "parallel.tp=2", "--set", "parallel.pp=2", "--set", "parallel.dp=2",
             "--set", "parallel.global_batch=16", "--executor", "serial", "--no-progress",
             "--price-per-gpu-hour", "2"]


def test_a_cluster_that_cannot_run_the_job_is_named_and_the_others_compared(capsys) -> None:
    """22B on 8 GPUs fits on 80 GB A100s and on no layout of 40 GB ones: the comparison still
    answers for the 80 GB cluster and names the other under the table and in --json (it used to
    end with exit 2 for the whole comparison)."""
    import json

    code, out, err = _main(["compare", "--clusters", "dgx-a100-40gb,dgx-a100", "--json", *PART_FITS], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [r["cluster"] for r in data["rows"]] == ["dgx-a100"] and data["rows"][0]["rank"] == 1
    (cannot,) = data["cannot_run"]
    assert (cannot["cluster"], cannot["gpus"]) == ("dgx-a100-40gb", 8)
    assert "fits in memory" in cannot["cannot_run"] and "the GPU has 39.6 GiB" in cannot["cannot_run"]
    code, out, err = _main(["compare", "--clusters", "dgx-a100-40gb,dgx-a100", *PART_FITS], capsys)
    assert code == 0, err
    assert "cannot run this job: dgx-a100-40gb on 8 GPUs: none of" in out
    # no cluster can: exit 2 naming the constraints that leave no layout (the --set parallel.*
    # fields), the cluster and its memory
    code, out, err = _main(["compare", "--clusters", "dgx-a100-40gb", *PART_FITS], capsys)
    assert code == 2 and "--set: got 'tp=2, pp=2, dp=2'" in err and "of dgx-a100-40gb" in err, err
    assert "the GPU has 39.6 GiB" in err


def test_the_scenarios_cluster_settings_hold_on_its_own_preset(capsys) -> None:
    """compare rebuilt every row from the stock preset: the 100G-Ethernet scenario's own layout
    read 12,659 tokens/s/GPU on dgx-h100 where `run` of the scenario prints 8,984 (InfiniBand
    instead of its eth-100g). Its preset keeps the scenario's cluster keys, and the row says so."""
    import json

    from clustersim import api
    from clustersim.scenario import load_scenario

    path = "scenarios/llama2_7b_h100x32_ethernet.yaml"
    code, out, err = _main(["compare", path, "--clusters", "dgx-h100", "--json", "--executor", "serial",
                            "--no-progress"], capsys)
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["cluster_settings"] == {"scale_out": "eth-100g", "nics_per_node": 2}
    report = api.simulate(load_scenario(path))
    assert row["scenario_layout_tokens_per_s_per_gpu"] == pytest.approx(report.tokens_per_s / 32, rel=1e-12)


def test_a_gpu_without_the_jobs_precision_cannot_run_it_and_a_stated_recipe_travels(capsys) -> None:
    """The MI355X fp8 scenario states fp8_recipe: mxfp8. On dgx-h100 compare timed delayed scaling
    instead (run and sweep refuse mxfp8 there), and an A100 (no fp8) ended the whole comparison
    with exit 2. Both are now clusters that cannot run the job; dgx-b200 is compared."""
    import json

    code, out, err = _main(["compare", "scenarios/llama3_8b_mi355x8_fp8.yaml", "--clusters",
                            "dgx-b200,dgx-h100,dgx-a100", "--json", "--executor", "serial", "--no-progress"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [r["cluster"] for r in data["rows"]] == ["dgx-b200"]
    why = {r["cluster"]: r["cannot_run"] for r in data["cannot_run"]}
    assert why["dgx-h100"].startswith("training.fp8_recipe mxfp8 does not run on h100-sxm-80gb")
    assert why["dgx-a100"].startswith("training.dtype fp8 does not run on a100-sxm-80gb")
    code, out, err = _main(["compare", "scenarios/llama3_8b_mi355x8_fp8.yaml", "--clusters", "dgx-h100",
                            "--executor", "serial", "--no-progress"], capsys)
    assert code == 2 and "training.fp8_recipe: got 'mxfp8'" in err


@pytest.mark.parametrize(("kwh", "unit", "text"), [(368.0, "kWh", "368.0 kWh"), (0.4, "kWh", "0.4 kWh"),
                                                   (25_000.0, "MWh", "25.0 MWh"), (3.1e6, "GWh", "3.1 GWh")])
def test_energy_reads_in_a_unit_with_a_whole_number(kwh, unit, text) -> None:
    """compare's energy column was whole MWh ("0 (0-0)" for 10B tokens), run's line "0.0 MWh"."""
    from clustersim.html.fragments import energy_unit, fmt_energy_kwh

    assert energy_unit(kwh)[0] == unit and fmt_energy_kwh(kwh) == text
