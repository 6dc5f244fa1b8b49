"""An fp16 Megatron job accumulates and reduces 16-bit gradients: Megatron forces fp32
accumulation and reduction under --bf16 only (megatron/training/arguments.py validate_args;
--accumulate-allreduce-grads-in-fp32 defaults to False) and its DDP holds the gradient buffer in
``torch.float if grad_reduce_in_fp32 else param.dtype`` (megatron/core/distributed/
distributed_data_parallel.py; megatron/model/distributed.py before 2023). Before this rule both
Megatron entries priced an fp32 reduction and fp32 main grads for every fp16 job."""

from __future__ import annotations

import pytest

from clustersim.api import simulate
from clustersim.cli import main
from clustersim.frameworks import grad_reduce_dtype, load_framework
from clustersim.plan.data_parallel import _dp_plan_of
from clustersim.scenario import load_scenario

SMALL = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "cluster.nodes=1", "parallel.tp=1",
         "parallel.pp=1", "parallel.dp=8", "parallel.global_batch=16"]


def _reduced_bytes(sc) -> float:
    """Bytes of the step's gradient reductions: the overlapped buckets (Megatron-Core) or the
    all-reduce after the backward (megatron-legacy: no overlap)."""
    dp = _dp_plan_of(sc)
    return sum(item.plan.size_bytes for group in (dp.grad_buckets, dp.after_backward)
               for items in group.values() for item in items)


@pytest.mark.parametrize("framework", ["megatron-core", "megatron-legacy"])
def test_the_rule_gives_fp16_for_an_fp16_megatron_job_and_fp32_for_bf16(framework):
    fw = load_framework(framework)
    assert grad_reduce_dtype(1, None, fw, dtype="fp16") == "fp16"
    assert grad_reduce_dtype(1, None, fw, dtype="bf16") == "fp32"
    assert grad_reduce_dtype(1, None, fw, "fp32", dtype="fp16") == "fp32"   # --accumulate-allreduce-grads-in-fp32


@pytest.mark.parametrize(("framework", "zero", "fsdp"), [("torchtitan", 3, 2), ("torchtitan", 1, None)])
def test_other_frameworks_keep_their_reduction_under_fp16(framework, zero, fsdp):
    """torchtitan reduces in fp32 whatever the job (DeepSpeed reduces in the model's dtype, fp16 for an
    fp16 job: tests/plan/test_deepspeed_model_reduce_dtype.py)."""
    fw = load_framework(framework)
    assert grad_reduce_dtype(zero, fsdp, fw, dtype="fp16") == grad_reduce_dtype(zero, fsdp, fw, dtype="bf16")


@pytest.mark.parametrize("framework", ["megatron-core", "megatron-legacy"])
def test_fp16_megatron_halves_the_reduction_and_the_main_grads(framework):
    fp16 = load_scenario(None, SMALL + ["training.dtype=fp16", f"framework={framework}"])
    fp32 = load_scenario(None, SMALL + ["training.dtype=fp16", f"framework={framework}",
                                        "training.grad_reduce_dtype=fp32"])
    assert _reduced_bytes(fp16) > 0 and _reduced_bytes(fp16) == _reduced_bytes(fp32) / 2
    a, b = simulate(fp16).to_json(), simulate(fp32).to_json()
    params = fp16.model.total_params()
    # ZeRO-0 holds the whole main_grad buffer: 2 bytes per parameter in fp16, 4 with the fp32 flag
    assert a["memory"]["gradients"] == pytest.approx(2 * params, rel=1e-9)
    assert b["memory"]["gradients"] == pytest.approx(4 * params, rel=1e-9)
    assert (a["grad_reduce_dtype"], b["grad_reduce_dtype"]) == ("fp16", "fp32")
    assert a["step_time_s"] < b["step_time_s"]
    # a bf16 job is unchanged: fp32
    assert simulate(load_scenario(None, SMALL + [f"framework={framework}"])).to_json()["grad_reduce_dtype"] == "fp32"


@pytest.mark.parametrize(("dtype", "value", "allowed"), [("fp16", "bf16", "fp32 or fp16"),
                                                         ("bf16", "fp16", "fp32 or bf16"),
                                                         ("fp32", "fp16", "fp32 or left out")])
def test_a_16_bit_reduction_of_the_other_dtype_exits_2_naming_the_field(dtype, value, allowed, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--json", *(x for s in SMALL + [f"training.dtype={dtype}", f"training.grad_reduce_dtype={value}"]
                                 for x in ("--set", s))])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "training.grad_reduce_dtype" in err and repr(value) in err and allowed in err, err
