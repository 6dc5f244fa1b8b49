"""Memory defects found by a search as users meet them: SGD states, the interval without evidence, FSDP prefetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.api import simulate
from clustersim.errors import InputError
from clustersim.scenario import load_scenario


def _report(*sets):
    return simulate(load_scenario(None, ["parallel.zero_stage=0", *sets])).to_json()


def test_sgd_keeps_one_moment_and_streams_fewer_bytes():
    """`training.optimizer: sgd` changed nothing: memory, step and optimizer time were Adam's."""
    adam, sgd = _report(), _report("training.optimizer=sgd")
    params = load_scenario(None).model.total_params()
    # Megatron-Core: fp32 master + m + v = 12 bytes; SGD: master + momentum = 8 (per parameter of the
    # GPU's shard: tp 2 x pp 2 split the model, ZeRO 0 keeps them unsharded over dp)
    ratio = sgd["memory"]["optimizer_states"] / adam["memory"]["optimizer_states"]
    assert ratio == pytest.approx(8 / 12, rel=1e-6)
    assert sgd["breakdown"]["optimizer"] < adam["breakdown"]["optimizer"]
    assert sgd["memory"]["weights"] == adam["memory"]["weights"] and params > 0


@pytest.mark.parametrize("sets", [("training.optimizer=sgd", "training.adam_moments=bf16"),
                                  ("training.dtype=fp32", "training.adam_moments=bf16")])
def test_bf16_moments_need_adam_under_mixed_precision(sets):
    with pytest.raises(InputError) as exc:
        load_scenario(None, list(sets))
    assert exc.value.field == "training.adam_moments"


@pytest.mark.parametrize("sets", [("training.dtype=fp8", "cluster.preset=dgx-b200", "cluster.nodes=2"),
                                  ("parallel.offload.optimizer=true",),
                                  ("parallel.zero_stage=3", "parallel.fsdp.hsdp_replicas=2")])
def test_the_memory_interval_widens_where_the_table_has_no_such_run(sets):
    """FP8/FP4, host offload and HSDP have no run in the memory table (the torchtitan Float8 runs
    outside it came out 11-25% above the prediction), yet kept the evidenced +-4% band."""
    j = simulate(load_scenario(None, list(sets))).to_json()["memory"]
    base = simulate(load_scenario(None)).to_json()["memory"]
    # hi = reserved peak x the table's 90th percentile (1.043), doubled margin without evidence (1.086)
    assert base["interval"][1] / base["reserved_peak_bytes"] == pytest.approx(1.043, rel=1e-3)
    assert j["interval"][1] / j["reserved_peak_bytes"] == pytest.approx(1.086, rel=1e-3)


def test_fsdp_prefetch_never_gathers_more_than_the_stage_holds():
    """parallel.fsdp.prefetch had no ceiling: 64 counted 63.6 GiB of gathered parameters on a stage
    whose every unit together is 15 GiB (the verdict went from fits to tight)."""
    def buffers(*sets):
        path = Path(__file__).resolve().parents[2] / "scenarios" / "llama3_8b_h200x8.yaml"
        return simulate(load_scenario(path,
                                      ["parallel.zero_stage=3", *sets])).to_json()["memory"]["comm_buffers"]
    whole = buffers("parallel.fsdp.reshard_after_forward=false")
    assert buffers("parallel.fsdp.prefetch=64") == whole
    assert buffers("parallel.fsdp.prefetch=1") < buffers("parallel.fsdp.prefetch=8") <= whole


def test_recomputed_norms_are_not_kept_on_a_dense_model():
    """--recompute-modules layernorm recomputed the norms (time) and kept their outputs (memory) on
    a dense model; the MoE path dropped them. The two norm outputs per layer are now not kept."""
    from clustersim.memory.saved import layer_saved
    sc = load_scenario(None)
    kept = {(s.op, s.tensor) for s in layer_saved(sc.model, sc.parallel, "bf16")}
    from dataclasses import replace
    norms = replace(sc.parallel, recompute_modules=("layernorm",))
    dropped = {(s.op, s.tensor) for s in layer_saved(sc.model, norms, "bf16")}
    assert kept - dropped == {("qkv", "input = norm output"), ("fc1", "input = norm output")}
