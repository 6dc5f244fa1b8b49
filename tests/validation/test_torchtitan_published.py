"""torchtitan's FSDP2 runs on 64 A100 (validation/reference/torchtitan_published.yaml,
benchmarks/accuracy_torchtitan.py): every row loads as torchtitan ran it (FSDP2 over the 64 GPUs,
its activation-checkpointing mode), fits in memory as it did, and is predicted. The accuracy of
the rows is reported, not asserted to a tolerance (docs/validation.md)."""

from validation.published_steps import ROOT, runs

TORCHTITAN_FILE = ROOT / "validation" / "reference" / "torchtitan_published.yaml"


def test_every_row_is_torchtitan_fsdp2_on_64_a100_and_fits():
    rows = runs(TORCHTITAN_FILE)
    assert len(rows) == 8 and len({r.id for r in rows}) == 8
    modes = set()
    for r in rows:
        sc = r.build()
        par = sc.parallel
        assert sc.framework.name == "torchtitan" and sc.cluster.num_gpus == 64 and par.dp == 64
        assert par.zero_stage == 3 and par.global_batch == 64 * par.micro_batch and sc.cluster.gpu.name.startswith("a100")
        modes.add((par.recompute, par.recompute_every))
        p = r.predict()
        assert p.predicted_s > 0 and abs(p.error) < 0.5, p   # a sanity bound; the table reports the error
    # torchtitan's three modes: every 2nd block, its per-op policy, every block (and none)
    assert modes == {("none", 2), ("selective-op", 0), ("full", 0), ("none", 0)}, modes
