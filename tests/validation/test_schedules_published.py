"""The pipeline-schedule validation table (validation/reference/schedules_published.yaml,
benchmarks/accuracy_schedules.py): the Zero Bubble paper's A100 runs load as the paper states them
(pure pipeline on 8-32 GPUs, one layer fewer on the first and the last chunk, one layer per chunk for
interleaved 1F1B), their step times are derived as each row says, and every schedule of every model
runs through the event engine.

The accuracy of the rows is reported, not asserted to a tolerance (docs/parallel.md)."""

import re

from clustersim.api import simulate
from clustersim.inputs import read_yaml_file
from validation.published_steps import ROOT, not_simulated, runs

SCHEDULES_FILE = ROOT / "validation" / "reference" / "schedules_published.yaml"
SCHEDULE_OF_SUFFIX = {"1f1b": "1f1b", "1f1bi": "interleaved-1f1b", "zb1p": "zb-h1", "zbv": "zb-v", "zb2p": "zb-2p"}
SHAPES = {"1.5b": (22, 2304, 24), "6.2b": (30, 4096, 32), "14.6b": (46, 5120, 40), "28.3b": (62, 6144, 48)}


def test_every_row_loads_as_the_paper_ran_it():
    rows = runs(SCHEDULES_FILE)
    derivation = {e["id"]: e["derivation"] for e in read_yaml_file(SCHEDULES_FILE, "test")["runs"]}
    assert len(rows) >= 50 and len({r.id for r in rows}) == len(rows)
    for r in rows:
        sc = r.build()
        par, model = sc.parallel, sc.model
        _, _, size, *_ = r.id.split("-")
        assert (model.layers, model.hidden, model.heads, model.seq_len) == (*SHAPES[size], 1024), r.id
        assert sc.cluster.gpu.name == "a100-sxm-80gb" and sc.framework.name == "megatron-legacy", r.id
        assert sc.training.attention == "standard" and sc.training.dtype == "fp16", r.id   # no flash attention
        assert par.tp == par.dp == 1 and par.pp == sc.cluster.num_gpus, r.id   # pure pipeline
        assert par.schedule == SCHEDULE_OF_SUFFIX[r.id.rsplit("-", 1)[1]], r.id
        stages = par.layers_per_stage
        share = (model.layers + 2) // len(stages)
        assert stages == (share - 1,) + (share,) * (len(stages) - 2) + (share - 1,), r.id
        if par.schedule == "interleaved-1f1b":
            assert share == 1, r.id   # each transformer layer serves as a chunk (paper section 5.1)
        # the row's own derivation: "m x b = B sequences / (X x G GPUs) = T s"
        stated = float(re.search(r"= ([0-9.]+) s$", derivation[r.id]).group(1))
        assert abs(r.measured_step_time_s() - stated) < 6e-4, r.id
    assert all(item["reason"] and item["source"] for item in not_simulated(SCHEDULES_FILE))


def test_every_schedule_of_every_setup_runs():
    """One row per (table, model, schedule), its fewest micro-batches: the event engine predicts it."""
    first = {}
    for r in runs(SCHEDULES_FILE):
        first.setdefault((r.id.split("-m")[0], r.id.rsplit("-", 1)[1]), r)
    assert len(first) >= 20
    for r in first.values():
        predicted = simulate(r.build()).step_time_s
        assert abs(predicted / r.measured_step_time_s() - 1) < 0.5, r.id   # a sanity bound; the table reports the error


def test_zbv_rows_leave_rank_0_the_embedding_and_the_loss():
    """Tables 6-7's ZB-V rows: the paper's split gives rank 0 (model stages 0 and 2 pp - 1) no layer."""
    rows = [r for r in runs(SCHEDULES_FILE) if r.id.endswith("-zbv")]
    assert len(rows) == 12
    assert not any("zbv" in item["id"] for item in not_simulated(SCHEDULES_FILE))
    for r in rows:
        sc = r.build()
        assert sc.parallel.layers_per_stage == (0,) + (1,) * sc.model.layers + (0,), r.id
