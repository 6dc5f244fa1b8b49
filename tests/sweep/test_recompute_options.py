"""The scenario's partial-recompute options in a sweep (clustersim.sweep.space.with_recompute):
recompute_modules on selective rows, recompute_method / recompute_num_layers on full rows whose
stages hold that many layers, as the loader (`clustersim run`) accepts them (docs/sweep.md)."""

from __future__ import annotations

import json
from pathlib import Path

from clustersim.scenario import check_layout, check_recompute, load_scenario
from clustersim.sweep.space import SearchSpace, count_layouts, enumerate_layouts
from tests.conftest import cli

HEAD = "name: llama3-8b\nmodel: {preset: llama3-8b}\ncluster: {preset: hgx-h200, nodes: 1}\ntraining: {dtype: bf16}\n"
BLOCK = "parallel: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64, zero_stage: 1, recompute: full, " \
        "recompute_method: block, recompute_num_layers: 8}\n"
MODULES = "parallel: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64, zero_stage: 1, recompute: selective, " \
          "recompute_modules: [layernorm]}\n"



def scenario_file(tmp_path: Path, parallel: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + parallel)
    return str(path)


def sets(parallel: dict) -> list[str]:
    out = []
    for k, v in parallel.items():
        value = json.dumps(v) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)
        out += ["--set", f"parallel.{k}={value}"]
    return out


def test_every_layout_of_the_space_is_one_the_loader_accepts(tmp_path):
    s = load_scenario(scenario_file(tmp_path, BLOCK))
    space = SearchSpace(limits=(("micro_batch", 1, 1),))
    layouts = list(enumerate_layouts(s.model, s.cluster, s.parallel, space))
    assert len(layouts) == count_layouts(s.model, s.cluster, s.parallel, space)
    for p in layouts:
        check_layout(s.model, s.cluster, p)
        check_recompute(s.model, p)
        if p.recompute == "full":
            assert (p.recompute_method, p.recompute_num_layers) == ("block", 8)
        else:
            assert (p.recompute_method, p.recompute_num_layers) == ("uniform", 1)
    assert not any(p.recompute == "full" and p.pp == 8 for p in layouts)   # 4 layers per stage < 8
    assert any(p.recompute == "full" and p.pp == 4 for p in layouts)


def test_full_rows_carry_the_method_and_run_as_the_sweep_ranks_them(tmp_path):
    path = scenario_file(tmp_path, BLOCK)
    p = cli("sweep", path, "--fix", "recompute=full", "--fix", "pp=8", "--top", "3", "--json", "--no-progress")
    assert p.returncode == 2, p.stdout
    assert "recompute_num_layers (8)" in p.stderr
    p = cli("sweep", path, "--fix", "recompute=full", "--fix", "pp=4", "--top", "3", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr
    top = json.loads(p.stdout)["top"]
    assert all(r["parallel"]["recompute_method"] == "block" and r["parallel"]["recompute_num_layers"] == 8
               for r in top)
    best = top[0]
    r = cli("run", path, *sets(best["parallel"]), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["step_time_s"] == best["step_time_s"]


def test_rows_of_another_recompute_say_they_run_without_the_method(tmp_path):
    p = cli("sweep", scenario_file(tmp_path, BLOCK), "--top", "3", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    for row in data["top"]:
        assert ("recompute_method" in row["parallel"]) == (row["parallel"]["recompute"] == "full")
    assert any("recompute_method (block)" in line and "rows of another recompute run without them" in line
               for line in data["verdict"])


def test_recompute_modules_travel_with_selective_rows(tmp_path):
    path = scenario_file(tmp_path, MODULES)
    p = cli("sweep", path, "--top", "3", "--no-progress", "--json")
    assert p.returncode == 0, p.stderr
    for row in json.loads(p.stdout)["top"]:
        assert ("recompute_modules" in row["parallel"]) == (row["parallel"]["recompute"] == "selective")
    p = cli("sweep", path, "--top", "1", "--fix", "recompute=selective", "--no-progress", "--json")
    assert p.returncode == 0, p.stderr
    best = json.loads(p.stdout)["top"][0]
    assert best["parallel"]["recompute_modules"] == ["layernorm"]
    r = cli("run", path, *sets(best["parallel"]), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["step_time_s"] == best["step_time_s"]


def test_a_scenario_built_in_code_meets_the_loaders_recompute_rule(tmp_path):
    from dataclasses import replace

    import pytest

    from clustersim.api import estimate
    from clustersim.errors import InputError

    s = load_scenario(scenario_file(tmp_path, BLOCK))
    with pytest.raises(InputError, match="recompute_num_layers"):
        estimate(replace(s, parallel=replace(s.parallel, pp=8, dp=1)))
