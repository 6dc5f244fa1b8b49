"""The frameworks' pipeline splits through the step models: the engine and the closed form run the
resolved split, memory and timing follow each stage's layers, the CLI names bad settings."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.api import estimate, simulate
from clustersim.errors import InputError
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def scenario(**parallel) -> dict:
    """Llama 3 8B on 4 DGX H100 at 4,096 tokens (shorter sequences leave a TP8 layer host-bound: the
    split would not show), TP8 inside a node and one pipeline stage per node: nothing contends
    (TP on NVLink, one p2p transfer per NIC direction), so the event engine equals its closed form."""
    base = {"tp": 8, "pp": 4, "micro_batch": 1, "global_batch": 16, "schedule": "1f1b"}
    base.update(parallel)
    if base.get("virtual_stages", 1) > 1:
        base["schedule"] = "interleaved-1f1b"
    return {"model": {"preset": "llama3-8b", "seq_len": 4096}, "cluster": {"preset": "dgx-h100", "nodes": 4},
            "parallel": base}


SPLITS = [
    ({"first_stage_layers": 6, "last_stage_layers": 6}, (6, 10, 10, 6)),
    ({"last_stage_layers": 5}, (9, 9, 9, 5)),
    ({"account_for_embedding": True, "account_for_loss": True}, (8, 9, 8, 7)),
    ({"account_for_embedding": 2, "account_for_loss": 3}, (8, 9, 9, 6)),       # torchtitan weights: 37 = 10+9+9+9, less 2 and 3
    ({"virtual_stages": 2, "first_stage_layers": 4, "last_stage_layers": 4}, (2, 6, 6, 2, 2, 6, 6, 2)),
    ({"virtual_stages": 2, "account_for_embedding": True, "account_for_loss": True}, (4, 5, 4, 4, 4, 4, 4, 3)),
    ({"virtual_stages": 2, "pipeline_layout": "Ettt|(tttt|)*6,tttttL"}, (3, 4, 4, 4, 4, 4, 4, 5)),
]


@pytest.mark.parametrize("par, counts", SPLITS)
def test_engine_and_closed_form_run_the_split(par, counts) -> None:
    sc = scenario_from_dict(scenario(**par))
    assert sc.parallel.layers_per_stage == counts
    work = build_step_work(sc)
    assert tuple(st.num_layers for st in work.stages) == counts
    # the first model stage carries the embedding, the last the output layer and loss: one unit more each
    assert len(work.stages[0].forward) == counts[0] + 1 and len(work.stages[-1].forward) == counts[-1] + 1
    event, closed = simulate(sc), estimate(sc)
    assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9)


def test_memory_per_stage_follows_the_split() -> None:
    even = simulate(scenario_from_dict(scenario()))
    heavy_last = simulate(scenario_from_dict(scenario(first_stage_layers=2, last_stage_layers=14)))
    w = [m.weights for m in heavy_last.memory_by_stage]
    w0 = [m.weights for m in even.memory_by_stage]
    # rank 0 holds 2 layers instead of 8, the last 14 instead of 8: weights follow (the middle ranks keep 8)
    assert w[0] < w0[0] and w[-1] > w0[-1] and w[1] == w0[1]
    assert heavy_last.memory.stage == 3


def test_timing_follows_the_split() -> None:
    even = scenario_from_dict(scenario())
    heavy = scenario_from_dict(scenario(first_stage_layers=2, last_stage_layers=14))
    balanced = scenario_from_dict(scenario(account_for_embedding=True, account_for_loss=True))
    # the pipeline runs at its slowest stage: 14 layers + the output layer on one stage is slower
    assert simulate(heavy).step_time_s > simulate(even).step_time_s
    assert estimate(heavy).step_time_s > estimate(even).step_time_s
    # taking a layer off the last stage (which also runs the 128K-vocabulary output layer) helps
    assert simulate(balanced).step_time_s < simulate(even).step_time_s


def test_more_stages_than_layers_with_empty_stages() -> None:
    data = scenario(pp=8, virtual_stages=4, global_batch=16, pipeline_layout="Et|(t|)*29|L")
    data["cluster"]["nodes"] = 8
    data["model"]["layers"] = 30
    sc = scenario_from_dict(data)
    assert sc.parallel.layers_per_stage == (1,) * 30 + (0, 0)
    event, closed = simulate(sc), estimate(sc)
    assert event.step_time_s > 0 and event.step_time_s >= closed.step_time_s * (1 - 1e-9)
    # the even split refuses the same job: 32 stages for 30 layers
    # an empty stage forwards at once: its p2p may meet the next transfer on a link (event engine only)
    data["parallel"].pop("pipeline_layout")
    with pytest.raises(InputError) as err:
        scenario_from_dict(data)
    assert err.value.field == "parallel.pp"


@pytest.mark.parametrize("setting, field", [
    ("parallel.first_stage_layers=7", "parallel.first_stage_layers"),       # 25 middle layers over 3 ranks
    ("parallel.first_stage_layers=0", "parallel.first_stage_layers"),
    ("parallel.account_for_loss=-1", "parallel.account_for_loss"),
    ("parallel.account_for_loss=99", "parallel.account_for_loss"),
    ("parallel.pipeline_layout=Et|tttt|L", "parallel.pipeline_layout"),
    ("parallel.pipeline_layout=[1,2]", "parallel.pipeline_layout"),
])
def test_cli_names_bad_split_settings(tmp_path, setting, field) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario()))
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--set", setting],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stderr
    assert field in p.stderr and "allowed" in p.stderr and "Traceback" not in p.stderr


def test_cli_json_and_report_show_the_split(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario(first_stage_layers=6, last_stage_layers=6)))
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parallel"]["layers_per_stage"] == [6, 10, 10, 6]
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "layers per stage [6, 10, 10, 6]" in p.stdout


def test_sweep_drops_the_template_split() -> None:
    from clustersim.api import SWEEP_EVALUATORS
    from clustersim.parallel.split import split_is_set
    from clustersim.sweep.runner import sweep_spec

    sc = scenario_from_dict(scenario(first_stage_layers=6, last_stage_layers=6))
    base = sweep_spec(sc, evaluators=SWEEP_EVALUATORS).scenario.parallel
    assert not split_is_set(base) and base.layers_per_stage == ()


# --- a rank with only the embedding and the loss: the Zero Bubble paper's ZB-V split ------------

@pytest.mark.parametrize("layers, pp", [(6, 4), (14, 8)])
def test_zbv_rank_without_layers_engine_equals_closed_form(layers, pp) -> None:
    # 2 pp chunks of one layer, the first and the last one fewer: rank 0 (model stages 0 and
    # 2 pp - 1 in the V) holds only the embedding and the loss. One stage per node: nothing contends
    data = scenario(pp=pp, global_batch=4 * pp, schedule="zb-v", account_for_embedding=True, account_for_loss=True)
    data["model"]["layers"] = layers
    data["cluster"]["nodes"] = pp
    sc = scenario_from_dict(data)
    assert sc.parallel.layers_per_stage == (0,) + (1,) * layers + (0,)
    work = build_step_work(sc)
    assert len(work.stages[0].forward) == 1 and len(work.stages[-1].forward) == 1   # the embedding; the loss
    event, closed = simulate(sc), estimate(sc)
    assert math.isclose(event.step_time_s, closed.step_time_s, rel_tol=1e-9)
    assert math.isclose(event.memory.peak_bytes_per_gpu, closed.memory.peak_bytes_per_gpu, rel_tol=1e-9)


def test_zbv_rank_without_layers_memory_by_hand() -> None:
    """Rank 0 of the paper's 6.2B ZB-V run (Table 6: 16 GPUs, micro-batch 6, 48 micro-batches)."""
    sc = scenario_from_dict({
        "framework": "megatron-legacy",
        "model": {"layers": 30, "hidden": 4096, "heads": 32, "ffn_act": "gelu", "vocab": 32000, "seq_len": 1024,
                  "tie_embeddings": True, "dropout": True},
        "cluster": {"preset": "dgx-a100", "nodes": 2, "scale_out": "roce-200g", "nics_per_node": 8},
        "parallel": {"tp": 1, "pp": 16, "dp": 1, "micro_batch": 6, "global_batch": 288, "schedule": "zb-v",
                     "account_for_embedding": True, "account_for_loss": True},
        "training": {"dtype": "fp16"}})
    assert sc.parallel.layers_per_stage[0] == sc.parallel.layers_per_stage[-1] == 0
    m = simulate(sc).memory_by_stage[0]
    # weights: the tied embedding / output matrix once, 32,000 x 4,096, and the final LayerNorm's
    # weight and bias (2 x 4,096), fp16: (131,072,000 + 8,192) x 2 B
    params = 32000 * 4096 + 2 * 4096
    assert m.weights == params * 2 == 262_160_384
    # fp16 main grads (an fp16 Megatron job without --accumulate-allreduce-grads-in-fp32:
    # clustersim.frameworks.grad_reduce_dtype); fp32 master + Adam
    assert m.gradients == params * 2 and m.optimizer_states == params * 12
    # activations, per micro-batch of 6 x 1,024 = 6,144 tokens: the embedding's dropout mask (1 B per
    # element) 6,144 x 4,096 = 25,165,824 B; the output end: final-norm input and logits-GEMM input
    # (2 x 6,144 x 4,096 x 2 B = 100,663,296), LayerNorm mean and rstd (2 x 4 B x 6,144 = 49,152) and
    # the cross-entropy's 4 B per logit (6,144 x 32,000 x 4 = 786,432,000): 887,144,448 B.
    # ZB-V's rank 0 runs 31 chunk-0 forwards before its first chunk-1 forward (peaks (31, 1) and
    # (32, 0)): at most 32 micro-batches of the embedding's chunk and 1 of the loss's, each end at its own peak
    assert m.activations == 32 * 25_165_824 + 887_144_448 == 1_692_450_816
    # no layer backward: the transient is the loss's logits copies, (6 - 4) B per logit
    assert m.transient == 2 * 6144 * 32000 == 393_216_000
