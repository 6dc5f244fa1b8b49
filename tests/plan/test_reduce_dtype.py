"""The dtype of the data-parallel reduction and its bytes: one rule (frameworks.grad_reduce_dtype,
compute.dtypes.reduce_bytes) that the plan's reductions and the memory model's buffers both read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.compute.dtypes import reduce_bytes
from clustersim.frameworks import grad_reduce_dtype, load_framework, zero3_impl
from clustersim.plan.dp_rules import grad_reduce_bytes
from clustersim.scenario import load_scenario

SMALL = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "cluster.nodes=1", "parallel.tp=1",
         "parallel.pp=1", "parallel.dp=8", "parallel.global_batch=16"]


@pytest.mark.parametrize(("framework", "zero", "fsdp", "want"), [
    ("megatron-core", 1, None, "fp32"),      # Megatron-Core reduces in fp32 by default
    ("deepspeed", 1, None, "bf16"),          # DeepSpeed's communication dtype is the 16-bit one
    ("deepspeed", 3, None, "bf16"),
    ("torchtitan", 3, 2, "fp32"),
])
def test_reduction_dtype_by_framework(framework, zero, fsdp, want):
    assert grad_reduce_dtype(zero, fsdp, load_framework(framework), dtype="bf16") == want
    assert grad_reduce_dtype(zero, fsdp, None, dtype="bf16") in ("fp32", "bf16")


def test_deepspeed_zero3_reduces_in_16_bit_even_when_the_framework_says_fp32():
    fw = replace(load_framework("deepspeed"), grad_reduce_dtype="fp32")
    assert zero3_impl(None, fw) == "deepspeed"
    assert grad_reduce_dtype(3, None, fw, dtype="bf16") == "bf16"
    assert grad_reduce_dtype(1, None, fw, dtype="bf16") == "fp32"
    assert zero3_impl(2, fw) == "fsdp2" and grad_reduce_dtype(3, 2, fw, dtype="bf16") == "fp32"


def test_bytes_follow_the_training_dtype():
    assert reduce_bytes("bf16", "bf16") == 2 and reduce_bytes("fp32", "bf16") == 4
    assert reduce_bytes("bf16", "fp32") == 4


def test_plan_and_memory_read_the_same_rule():
    """A framework reducing in bf16 halves the plan's reduced bytes and the ZeRO-2 bucket memory."""
    from clustersim.memory.buffers import buffer_bytes
    s = load_scenario(None, SMALL + ["parallel.zero_stage=2"])
    bf16 = replace(s, framework=replace(s.framework, grad_reduce_dtype="bf16"))
    assert grad_reduce_bytes(s) == 2 * grad_reduce_bytes(bf16) == 4
    held = [buffer_bytes(x.model, x.parallel, x.training.dtype, x.model.layers, True, True, x.framework)[0]
            for x in (s, bf16)]
    assert held[0] > held[1]
