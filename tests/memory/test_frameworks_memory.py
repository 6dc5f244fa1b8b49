"""Memory as each framework holds it: states, FSDP buffers, loss copies, recompute policies,
the verdict. Hand-checkable cases; the derivations are in the comments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim import units
from clustersim.api import estimate
from clustersim.frameworks import load_framework
from clustersim.hardware.load import load_cluster
from clustersim.memory import memory_report
from clustersim.memory.buffers import zero3_in_flight_bytes
from clustersim.memory.policies import rank_policies, stage_policies
from clustersim.memory.report import MemoryReport
from clustersim.parallel.layout import ParallelLayout
from clustersim.scenario import load_scenario
from tests.conftest import preset

LLAMA13 = preset("llama2-13b")   # 40 layers, h 5120, f 13824, 40 heads, vocab 32000, seq 4096
TT = load_framework("torchtitan")
MC = load_framework("megatron-core")


def test_states_per_framework_by_hand():
    cluster = load_cluster("dgx-a100", 8)
    lay = ParallelLayout(dp=64, zero_stage=3, micro_batch=2, global_batch=128)
    params = LLAMA13.total_params()      # 13,015,864,320 (40 layers + embedding + output + final norm)
    tt = memory_report(LLAMA13, lay, cluster, "bf16", 40, 1, True, True, framework=TT)
    # torchtitan FSDP2: fp32 parameter shard (4 B), fp32 gradient shard (4 B), AdamW m, v (8 B), over 64
    assert (tt.weights, tt.gradients, tt.optimizer_states) == (
        round(4 * params / 64), round(4 * params / 64), round(8 * params / 64))
    mc = memory_report(LLAMA13, replace(lay, zero_stage=1), cluster, "bf16", 40, 1, True, True, framework=MC)
    # Megatron-Core distributed optimizer: bf16 params 2 + fp32 main grads 4 + (master, m, v) 12 / dp
    assert (mc.weights, mc.gradients, mc.optimizer_states) == (2 * params, 4 * params, round(12 * params / 64))


def test_fsdp2_buffers_in_flight_by_hand():
    lay = ParallelLayout(dp=64, zero_stage=3, micro_batch=2, global_batch=128)
    layer = 4 * 5120 * 5120 + 3 * 5120 * 13824 + 2 * 5120       # 317,209,600 parameters of one block (two RMSNorm weights)
    vocab = 32000 * 5120
    params, grads = zero3_in_flight_bytes(LLAMA13, lay, "bf16", 40, True, True, TT)
    # the block being computed + one prefetched, bf16; the [norm, output] unit stays unsharded after forward
    assert params == 2 * layer * 2 + vocab * 2
    # backward: one block's bf16 gradients and its fp32 reduce-scatter input
    assert grads == layer * (2 + 4)
    # under PP torchtitan keeps every unit unsharded and accumulates fp32 gradients until the last backward
    pp = replace(lay, pp=2, dp=32, global_batch=128)          # 2 micro-batches per step
    params, grads = zero3_in_flight_bytes(LLAMA13, pp, "bf16", 20, True, False, TT)
    stage = layer * 20 + vocab
    assert params == stage * 2 + stage * 4 and grads == layer * 6


def test_issue_example_llama2_13b_torchtitan_breakdown():
    """The issue's run: no longer 157 GiB / does-not-fit; torchtitan ran it on 80 GB A100."""
    sc = load_scenario("scenarios/llama2_13b_a100x64_torchtitan.yaml")
    m = estimate(sc).memory
    assert m.verdict in ("fits", "tight") and m.fits
    # activations: 40 layers x one micro-batch of T = 2 x 4096 tokens:
    # 2 norms (input 2 B + fp32 rstd per token), QKV input 2, Q K V 6, O 2, lse 4 x 40 heads per token,
    # fc1 input 2, eager SwiGLU 4 x f x 2 B; plus the last stage's norm and logits inputs and fp32 log-softmax
    t, h, f = 8192, 5120, 13824
    layer = 2 * (2 * t * h + 4 * t) + 2 * t * h + 6 * t * h + 2 * t * h + 4 * 40 * t + 2 * t * h + 8 * t * f
    out = 2 * 2 * t * h + 4 * t + 4 * t * 32000
    assert m.activations == 40 * layer + out
    # transient: the backward's gradients and one block's FSDP gradients beat the loss's logits copies
    assert m.transient > (10 - 4) * t * 32000
    assert m.allocated_peak_bytes < m.capacity_bytes_per_gpu < m.interval[1]


def test_verdict_from_the_interval():
    def report(lo_gib: float, hi_gib: float) -> MemoryReport:
        return MemoryReport(*([0] * 10), capacity_bytes_per_gpu=80 * units.GiB,
                            interval=(int(lo_gib * units.GiB), int(hi_gib * units.GiB)))
    assert report(60, 79).verdict == "fits" and report(60, 79).fits
    assert report(70, 85).verdict == "tight" and report(70, 85).fits
    assert report(81, 90).verdict == "does-not-fit" and not report(81, 90).fits


def test_partial_recompute_policies():
    # torchtitan's layer-wise AC: a counter over a rank's blocks, every 3rd one fully recomputed
    lay = ParallelLayout(pp=2, recompute_every=3)
    assert stage_policies(lay, 10) == (("none", "none", "full", "none", "none"),
                                       ("none", "none", "full", "none", "none"))
    # interleaved: global stages of 2, 3, 3, 2 layers (extra layers in the middle); rank 0 runs stages 0
    # and 2 (blocks 1-2, 3-5: block 3 is the first of stage 2), rank 1 stages 1 and 3 (block 3 ends stage 1)
    inter = replace(lay, virtual_stages=2, schedule="interleaved-1f1b")
    assert stage_policies(inter, 10) == (("none", "none"), ("none", "none", "full"), ("full", "none", "none"),
                                         ("none", "none"))
    # Megatron's block method: the first N layers of every chunk; uniform: groups of N keep one input
    block = ParallelLayout(pp=2, recompute="full", recompute_method="block", recompute_num_layers=2)
    assert stage_policies(block, 10)[0] == ("full", "full", "none", "none", "none")
    uni = replace(block, recompute_method="uniform", recompute_num_layers=2)
    assert stage_policies(uni, 10)[1] == ("full", "full-inner", "full", "full-inner", "full")
    assert rank_policies(uni, 10, 1).group_layers == 2


@pytest.mark.parametrize("policy", ["selective", "selective-op", "full"])
def test_every_policy_saves_less_but_adds_a_working_set(policy):
    cluster = load_cluster("dgx-a100", 8)
    base = ParallelLayout(dp=64, zero_stage=3, micro_batch=2, global_batch=128)
    none = memory_report(LLAMA13, base, cluster, "bf16", 40, 1, True, True, framework=TT)
    other = memory_report(LLAMA13, replace(base, recompute=policy), cluster, "bf16", 40, 1, True, True, framework=TT)
    assert other.activations < none.activations
    assert other.transient >= none.transient


def test_loss_copies_per_framework():
    # the last stage while the loss runs: torchtitan's bf16 logits + fp32 copy + fp32 log-softmax (10 B per
    # logit) against Megatron's in-place fp32 softmax (6 B); both keep 4 B per logit for the backward
    cluster = load_cluster("dgx-h100", 1)
    m = preset("llama3-8b")
    lay = ParallelLayout(dp=8, zero_stage=3, micro_batch=1, global_batch=8, recompute="full")
    logits = 8192 * 128256
    tt = memory_report(m, lay, cluster, "bf16", 32, 1, True, True, framework=TT)
    mc = memory_report(m, lay, cluster, "bf16", 32, 1, True, True, framework=MC)
    assert tt.transient == (10 - 4) * logits           # larger than a recomputed layer and its gradients
    assert 2 * logits <= mc.transient < tt.transient
    assert tt.activations - mc.activations == 0   # full recompute keeps the same layer inputs and loss output


def test_torchtitan_configs_import_into_the_recompute_fields():
    """A torchtitan job config's activation checkpointing lands on the recompute fields as torchtitan
    runs it: layer-wise AC checkpoints every N-th block and leaves the others alone; compile is kept."""
    from clustersim.importers import finish, import_text
    from clustersim.scenario import scenario_from_dict
    from validation.logs.formats import torchtitan_toml

    toml = torchtitan_toml(name="llama3", flavor="8B", local_batch=2, seq_len=8192, ac="selective", compile_=True)
    toml = toml.replace('selective_ac_option = "op"', 'selective_ac_option = "2"')
    assert 'selective_ac_option = "2"' in toml
    res = finish(import_text("torchtitan-toml", toml, "8b.toml", cluster="dgx-h100", nodes=1), [])
    p = res.scenario["parallel"]
    assert (p["recompute"], p["recompute_every"]) == ("none", 2) and res.scenario["training"]["compile"] is True
    sc = scenario_from_dict(res.scenario)
    assert [pol.count("full") for pol in stage_policies(sc.parallel, sc.model.layers)] == [16]


def test_low_precision_weight_copies_under_every_bf16_framework() -> None:
    """fp8 added TE's quantized copy and its transpose to the bf16 weight (4 bytes), but with a
    framework given (always, in a scenario) fp4 fell back to the bf16 weight's 2 bytes: an NVFP4
    job's weights were counted like bf16 ones."""
    from clustersim.compute.dtypes import weight_bytes
    from clustersim.frameworks import framework_names, load_framework
    from clustersim.memory.states import bytes_per_param

    for name in framework_names():
        fw = load_framework(name)
        if fw.param_bytes != 2:
            continue
        assert bytes_per_param("bf16", fw)[0] == 2
        assert bytes_per_param("fp8", fw)[0] == weight_bytes("fp8") == 4
        assert bytes_per_param("fp4", fw)[0] == weight_bytes("fp4") == 3.125
