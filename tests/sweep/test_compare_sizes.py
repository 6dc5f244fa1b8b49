"""`compare --gpus`: one size rule with `sweep --gpus` (part of a node where the count divides it) and
one row per size of a preset (docs/sweep.md: counts that round to the same size give one row)."""

from __future__ import annotations

import json

from clustersim.sweep.compare import compare_cluster, distinct_sizes
from tests.conftest import cli


def test_counts_that_round_to_one_size_give_one_row():
    sizes = distinct_sizes("gb200-nvl72", [76, 80])
    assert len(sizes) == 1
    size, asked = sizes[0]
    assert asked == 80 and compare_cluster("gb200-nvl72", size).num_gpus == 80
    assert "--gpus 76 and 80 run as the same 80 GPUs of gb200-nvl72: one row" in size.note
    (size, asked), = distinct_sizes("hgx-h200", [3, 8])
    assert asked == 8 and "--gpus 3 and 8" in size.note


def test_compare_holds_part_of_a_node_as_sweep_does():
    (size, _), = distinct_sizes("hgx-h200", [4])
    cluster = compare_cluster("hgx-h200", size)
    assert (cluster.num_gpus, cluster.num_nodes, size.note) == (4, 1, "")
    p = cli("compare", "scenarios/llama3_8b_h200x8.yaml", "--clusters", "hgx-h200", "--gpus", "4,8", "--no-progress",
            "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert sorted(r["gpus"] for r in rows) == [4, 8]
    assert all(not r["size_note"] for r in rows)
    four = next(r for r in rows if r["gpus"] == 4)
    s = cli("sweep", "scenarios/llama3_8b_h200x8.yaml", "--gpus", "4", "--top", "1", "--json", "--no-progress")
    assert s.returncode == 0, s.stderr
    assert json.loads(s.stdout)["top"][0]["step_time_s"] == four["step_time_s"]
