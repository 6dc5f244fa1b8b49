"""Simulated bubble and peak memory of each pipeline schedule against its closed form
(docs/moe.md, "Schedules: simulated bubble against the closed form"; docs/parallel.md).

    PYTHONPATH=. python benchmarks/schedule_bubbles.py

The scenario of tests/engine/test_schedule_bubbles.py: a dense 64-layer model on 4 pipeline ranks,
16 micro-batches, a link with no cost so that the schedule alone sets the bubble. Prints, per
schedule, the chunk times, the event engine's bubble on the critical rank, the closed form of
clustersim.parallel.bubble, their difference, and the activations and weights of the busiest rank.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from clustersim.api import simulate
from clustersim.hardware.load import add_profile_file
from clustersim.parallel.bubble import analytic_bubble
from clustersim.plan.actions import plan_actions
from clustersim.plan.compiled_unit import UnitCache
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import scenario_from_dict

FAST = """fabrics:
  test-instant-link:
    kind: nvswitch
    description: a link with no cost (isolates the pipeline schedule)
    bw_GBps: 1000000
    latency_us: 0.001
"""
CASES = [("1f1b", 1), ("interleaved-1f1b", 2), ("zb-h1", 1), ("zb-v", 1), ("dualpipe", 1), ("dualpipe-v", 1)]


def scenario(schedule: str, v: int):
    return scenario_from_dict({
        "model": {"preset": "megatron-7.5b", "layers": 64, "vocab": 256},
        "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 4, "scale_up": "test-instant-link"},
        "parallel": {"tp": 1, "pp": 4, "dp": 1, "micro_batch": 1, "global_batch": 16, "schedule": schedule,
                     "virtual_stages": v},
        "training": {"dtype": "bf16"}})


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fast.yaml"
        path.write_text(FAST)
        add_profile_file(path)
        table = Table(title="pipeline bubble: event engine vs closed form (pp 4, 16 micro-batches, 64 layers)")
        for col in ("schedule", "f / b / w ms", "step s", "bubble s", "closed form s", "diff", "act GiB",
                    "weights GiB"):
            table.add_column(col, justify="right")
        for schedule, v in CASES:
            sc = scenario(schedule, v)
            work, cache = build_step_work(sc), UnitCache(sc)
            st = work.stages[1]
            f = sum(cache(x).time_s for x in st.forward)
            b = sum(cache(x).time_s for x in st.backward_input)
            w = sum(cache(x).time_s for x in st.backward_weight)
            report = simulate(sc)
            r = report.critical_rank
            busy = sum(cache(x).time_s for a in plan_actions(sc, work)[r] for x in a.works)
            bubble = report.step_time_s - work.optimizer_time_s[r] - busy
            expected = analytic_bubble(schedule, sc.parallel.pp, f, b, w)
            act = max(m.activations for m in report.memory_by_stage) / 2**30
            weights = max(m.weights for m in report.memory_by_stage) / 2**30
            table.add_row(schedule + (f" v{v}" if v > 1 else ""), f"{f * 1e3:.2f} / {b * 1e3:.2f} / {w * 1e3:.2f}",
                          f"{report.step_time_s:.4f}", f"{bubble:.4f}", f"{expected:.4f}",
                          f"{(bubble - expected) / expected:+.2%}", f"{act:.2f}", f"{weights:.2f}")
        Console(width=160).print(table)


if __name__ == "__main__":
    main()
