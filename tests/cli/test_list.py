"""`clustersim list`: correct values, readable at an 80-column terminal and a wide one."""

from __future__ import annotations

import json

import pytest

from clustersim.cli import main

KINDS = ("models", "clusters", "gpus", "fabrics", "frameworks")


def _list(kind: str, width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
          *extra: str) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    with pytest.raises(SystemExit) as exc:
        main(["list", kind, *extra])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [80, 200])
def test_every_table_fits_and_names_are_whole(kind: str, width: int, capsys, monkeypatch) -> None:
    names = [row["name"] for row in json.loads(_list(kind, width, capsys, monkeypatch, "--json"))]
    out = _list(kind, width, capsys, monkeypatch)
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, out
    assert "…" not in out, out  # nothing cut short with an ellipsis
    firsts = [line.split()[0] for line in lines if line.strip()]
    for name in names:  # every preset on a line of its own, its name whole in the first column
        assert name in firsts, (name, out)


def test_wide_terminal_shows_every_column_and_description(capsys, monkeypatch) -> None:
    out = _list("clusters", 200, capsys, monkeypatch)
    for header in ("GPUs per node", "scale-up domain", "scale-out fabric", "description"):
        assert header in out
    assert "left out" not in out


def test_narrow_terminal_names_what_it_left_out(capsys, monkeypatch) -> None:
    out = _list("models", 80, capsys, monkeypatch)
    assert "left out at 80 columns:" in out and "clustersim list models --json" in out


def test_clusters_show_the_presets_scale_up_domain(capsys, monkeypatch) -> None:
    rows = {r["name"]: r for r in json.loads(_list("clusters", 80, capsys, monkeypatch, "--json"))}
    assert rows["gb200-nvl72"]["scale_up_domain"] == 72 and rows["gb300-nvl72"]["scale_up_domain"] == 72
    assert rows["dgx-h100"]["scale_up_domain"] == 8
    out = _list("clusters", 80, capsys, monkeypatch)
    row = next(line for line in out.splitlines() if line.startswith("gb200-nvl72"))
    assert row.split()[2:4] == ["4", "72"]  # GPUs per node, scale-up domain


def test_frameworks_names_are_whole(capsys, monkeypatch) -> None:
    out = _list("frameworks", 80, capsys, monkeypatch)
    for name in ("megatron-core", "megatron-legacy", "torchtitan", "deepspeed"):
        assert f"\n{name} " in out


def test_parameter_counts_line_up_to_two_decimals(capsys, monkeypatch) -> None:
    """Every model's count in billions to two decimals (GLM-4.5 352.80B, not 352.8), so the column
    reads as one; the JSON keeps the number."""
    rows = {row["name"]: row for row in json.loads(_list("models", 200, capsys, monkeypatch, "--json"))}
    out = _list("models", 200, capsys, monkeypatch)
    cells = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.split() and line.split()[0] in rows}
    assert cells["glm-4.5"] == f"{rows['glm-4.5']['params_B']:.2f}" == "352.80"
    assert all(len(cell.split(".")[1]) == 2 for cell in cells.values()), cells


def test_list_gpus_json_says_null_where_a_profile_gives_no_value():
    """An unpriced GPU read price 0.0 and every GPU gemm_efficiency 0.0 (the sweep's JSON says null
    for 'no price'); 0 is no price and no fixed efficiency."""
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "clustersim", "list", "gpus", "--json"], capture_output=True,
                         text=True, timeout=120)
    rows = {g["name"]: g for g in json.loads(out.stdout)}
    assert rows["a100-sxm-40gb"]["price_per_gpu_hour_usd"] is None and rows["a100-sxm-80gb"]["price_per_gpu_hour_usd"] > 0
    assert all(g["gemm_efficiency"] is None or 0 < g["gemm_efficiency"] <= 1 for g in rows.values())
