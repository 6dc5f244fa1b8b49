"""With one pipeline stage, parallel.overlap_moe_expert_parallel_comm runs Megatron-Core's
``combined_1f1b_schedule_for_no_pipelining`` order: the first forward alone, then each next
forward paired with the previous micro-batch's backward, then the last backward alone (docs/moe.md,
"EP overlap: which forward pairs with which backward"). clustersim paired each forward with its own
micro-batch's backward, which needs that forward's output: every action ran in a pair, and a lone
micro-batch saved EP time (Mixtral 8x7B, 4 micro-batches: step 1.391 s with the flag, now 1.426 s,
1.523 s without it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.parallel.pipeline import build_schedule, pair_steady_state
from clustersim.plan.memory_plan import schedule_in_flight

ROOT = Path(__file__).resolve().parents[2]
MIXTRAL = ["scenarios/mixtral_8x7b_h100x64.yaml"]   # pp 1, dp 32, micro_batch 1
ON = ("--set", "parallel.overlap_moe_expert_parallel_comm=true")


def _run(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", *MIXTRAL, *args, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _orders(tmp_path: Path, *args: str) -> dict[int, list[str]]:
    """Per rank (the trace's pid), its actions and pairs on the compute stream, in time order."""
    trace = tmp_path / "trace.json"
    p = subprocess.run([sys.executable, "-m", "clustersim", "run", *MIXTRAL, *args, *ON, "--trace", str(trace)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    compute = {(e["pid"], e["tid"]) for e in events
               if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "compute"}
    orders: dict[int, list[str]] = {}
    for e in sorted((e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in compute),
                    key=lambda e: e["ts"]):
        m = re.match(r"\d[FB]\d+(&&\d[FB]\d+)?", e["name"])
        order = orders.setdefault(e["pid"], [])
        if m and (not order or order[-1] != m.group(0)):
            order.append(m.group(0))
    return orders


def test_the_trace_runs_the_first_forward_and_the_last_backward_alone(tmp_path: Path) -> None:
    orders = _orders(tmp_path, "--set", "parallel.global_batch=128")   # 4 micro-batches over dp 32
    assert orders == {0: ["0F0", "0F1&&0B0", "0F2&&0B1", "0F3&&0B2", "0B3"]}


def test_no_pair_of_an_interleaved_pipeline_holds_one_micro_batch_twice(tmp_path: Path) -> None:
    """The last stage of an interleaved pipeline had paired its last chunk's forward with that
    micro-batch's own backward (1F0&&1B0, ...); Megatron-Core runs one more warmup forward."""
    orders = _orders(tmp_path, "--set", "parallel.pp=2", "--set", "parallel.dp=16", "--set", "parallel.virtual_stages=2",
                     "--set", "parallel.schedule=interleaved-1f1b", "--set", "parallel.global_batch=64")
    assert orders[1] == ["0F0", "0F1", "1F0", "1F1&&1B0", "0F2&&1B1", "0F3&&0B0", "1F2&&0B1", "1F3&&1B2",
                         "1B3", "0B2", "0B3"]
    for order in orders.values():
        pairs = [x.split("&&") for x in order if "&&" in x]
        assert pairs and all(f.replace("F", "") != b.replace("B", "") for f, b in pairs), order


@pytest.mark.parametrize("engine", ["event", "analytical"])
@pytest.mark.parametrize("global_batch", [32, 128])
def test_the_overlap_saves_at_most_n_minus_1_of_n_of_the_all_to_all(engine: str, global_batch: int) -> None:
    n = global_batch // 32
    common = ("--engine", engine, "--set", f"parallel.global_batch={global_batch}")
    plain, paired = _run(*common), _run(*common, *ON)
    saved = plain["step_time_s"] - paired["step_time_s"]
    assert saved <= (n - 1) / n * plain["breakdown"]["ep_comm"] + 1e-9, (saved, plain["breakdown"]["ep_comm"])
    if n == 1:   # nothing to pair a lone micro-batch with
        assert paired["step_time_s"] == plain["step_time_s"]
    else:
        assert saved > 0


def test_a_pair_holds_one_micro_batch_of_activations() -> None:
    """The pair's backward frees its layers last to first as its forward stores its own: the
    activations held are those of one micro-batch, as without the flag (docs/memory.md)."""
    common = ("--set", "parallel.global_batch=128")
    plain, paired = _run(*common), _run(*common, *ON)
    assert paired["memory"]["activations"] == plain["memory"]["activations"]


@pytest.mark.parametrize(("pp", "m", "v"), [(1, 1, 1), (1, 4, 1), (2, 4, 2), (4, 8, 2), (4, 16, 3), (8, 64, 4)])
def test_the_combined_order_holds_what_1f1b_holds(pp: int, m: int, v: int) -> None:
    """One more warmup forward, and each pair freeing its backward's layers as its forward stores
    its own: the peaks of every rank are 1F1B's (what the sweep's memory screen counts)."""
    plain = build_schedule("1f1b" if v == 1 else "interleaved-1f1b", pp, m, v)
    assert schedule_in_flight(pair_steady_state(plain), v, combined=True) == schedule_in_flight(plain, v)
