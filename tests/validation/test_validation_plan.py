"""The validation plan holds enough held-out cases, and they differ from every fit case."""

import pytest

from clustersim.calibrate.plan import build_plan, record_items
from clustersim.errors import InputError


def _key(case):
    p = case["params"]
    return (p.get("op"), p.get("world"), p.get("size_bytes"))


@pytest.mark.parametrize("level", ["ci", "quick", "full"])
def test_names_unique_and_holdouts_not_in_fit_set(level):
    plan = record_items(build_plan(level, 4))
    assert len({c["name"] for c in plan}) == len(plan)
    fit = {_key(c) for c in plan if c["role"] == "fit" and c["kind"] == "collective"}
    held = [c for c in plan if c["role"] == "holdout" and c["kind"] == "collective"]
    assert held and all(_key(c) not in fit for c in held)
    assert all(c["timeout_s"] > 0 for c in build_plan(level, 4))


def test_quick_plan_meets_the_acceptance_shape():
    plan = record_items(build_plan("quick", 4))
    held = [c for c in plan if c["role"] == "holdout"]
    kinds = {c["kind"] for c in held}
    assert len(held) >= 10
    assert {"ddp_step", "pp_step", "tp_step", "collective", "compute"} <= kinds
    fit_worlds = {c["params"]["world"] for c in plan if c["role"] == "fit" and c["kind"] == "collective"}
    held_worlds = {c["params"]["world"] for c in held if c["kind"] == "collective"}
    assert held_worlds - fit_worlds == {3}  # a world size the fit never saw


def test_compute_sweep_yields_fit_and_holdout_items():
    sweep = next(c for c in build_plan("quick", 4) if c["kind"] == "compute_sweep")
    roles = [i["role"] for i in sweep["params"]["items"]]
    assert sweep["emits"] == [i["name"] for i in sweep["params"]["items"]]
    assert roles.count("fit") == 4 and roles.count("holdout") == 3  # 3 GEMMs + the copy; 3 GEMMs


def test_world_sizes_never_exceed_nprocs():
    for c in build_plan("quick", 2):
        assert c["params"].get("world", 2) <= 2


@pytest.mark.parametrize("level,nprocs", [("huge", 4), ("quick", 1)])
def test_bad_arguments_are_input_errors(level, nprocs):
    with pytest.raises(InputError):
        build_plan(level, nprocs)



def test_ci_fits_each_constant_to_one_shape():
    """docs/validation.md: `validate --ci` has one fit shape per constant, so that a loaded 2-core
    runner cannot fail its fit check by noise (with --nprocs 4 the fabric took all_reduce/w2/2MiB
    and all_reduce/w4/2MiB, +10% and -13% around the one fitted bandwidth: exit 1)."""
    from clustersim.calibrate import fit_points
    for nprocs in (2, 4):
        records = record_items(build_plan("ci", nprocs))
        for mode, link in (("loopback", {}), ("netns", {"burst_bytes": 500_000})):
            used = fit_points.select(records, mode, link).used
            assert sorted(used.values()) == ["fabric", "gemm", "memory"], (nprocs, mode, used)
