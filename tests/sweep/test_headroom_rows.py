"""Ranked by free memory, a group's row is its roomiest member (clustersim.sweep.groups.rank_groups,
docs/sweep.md): the ZeRO-2 twin, not the faster ZeRO-1 one with 26 GiB less free."""

from __future__ import annotations

import json

from tests.conftest import cli


def test_memory_headroom_rows_show_the_roomiest_twin():
    """The groups are those `--rank-by time` lists; each row is the group's roomiest member."""
    scenario = "scenarios/llama3_8b_h200x8.yaml"
    p = cli("sweep", scenario, "--top", "3", "--rank-by", "memory-headroom", "--no-progress", "--json")
    assert p.returncode == 0, p.stderr
    top = json.loads(p.stdout)["top"]
    run = cli("run", scenario, "--set", "parallel.zero_stage=2", "--set", "parallel.recompute=none", "--json")
    assert run.returncode == 0, run.stderr
    memory = json.loads(run.stdout)["memory"]
    twin_free = memory["capacity_bytes_per_gpu"] - memory["peak_bytes_per_gpu"]
    row = next(r for r in top if r["parallel"]["recompute"] == "none" and r["parallel"]["micro_batch"] == 1
               and r["parallel"]["tp"] == 1 and r["parallel"]["pp"] == 1)
    assert row["free_bytes_per_gpu"] == twin_free   # 62.3 GiB; the ZeRO-1 twin's 36.5 GiB stood for the group
    assert row["parallel"]["zero_stage"] == 2
    for row in top:
        if row["group"]["varies"].get("zero_stage") == [1, 2]:
            assert row["parallel"]["zero_stage"] == 2
    frees = [r["free_bytes_per_gpu"] for r in top]
    assert frees == sorted(frees, reverse=True)
    by_time = cli("sweep", scenario, "--top", "3", "--no-progress", "--json")
    assert by_time.returncode == 0, by_time.stderr
    keys = ("tp", "pp", "dp", "cp", "micro_batch", "recompute", "sequence_parallel", "schedule")
    assert sorted(tuple(r["parallel"][k] for k in keys) for r in json.loads(by_time.stdout)["top"]) == \
        sorted(tuple(r["parallel"][k] for k in keys) for r in top)
