"""Where a predicted step goes: the engine's breakdown and the compute stream op by op.

For reference runs (validation/reference/, matched by a substring of their name, e.g. ``1.7B``)
or scenario files: the step's critical-path breakdown (``clustersim run``'s ``breakdown``), then
every compute op of one rank summed over the step's micro-batches (time, share of the compute
stream, achieved TFLOP/s), grouped into GEMMs, attention core, logits + loss, memory-bound ops,
and the data-parallel traffic of the step (bytes and time of each collective alone on the link).

    PYTHONPATH=. python benchmarks/breakdown.py 1.7B 32B
    PYTHONPATH=. python benchmarks/breakdown.py scenarios/some.yaml [--ops]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's clustersim, not an installed one

from clustersim.api import simulate  # noqa: E402
from clustersim.compute.ops import Op  # noqa: E402
from clustersim.plan.data_parallel import dp_plan  # noqa: E402
from clustersim.plan.stage_work import build_step_work  # noqa: E402
from clustersim.scenario import Scenario, load_scenario, scenario_from_dict  # noqa: E402
from clustersim.uncertainty.reference import reference_runs  # noqa: E402

GEMM_SUFFIXES = ("qkv", "attn_out_proj", "fc1", "fc2", "router")


def group_of(name: str) -> str:
    base = name.removesuffix("_bwd").removesuffix("_dgrad").removesuffix("_wgrad")
    if name.startswith("attention_core"):
        return "attention core"
    if base in ("logits", "cross_entropy") or name.startswith("cross_entropy"):
        return "logits + loss"
    if base in GEMM_SUFFIXES or name.endswith(("_dgrad", "_wgrad")):
        return "layer GEMMs"
    return "memory-bound"


def op_table(scenario: Scenario, rank_stage: int) -> dict[str, list[float]]:
    """{op name: [time s, FLOPs]} of one rank's compute stream over the whole step."""
    work = build_step_work(scenario)
    stage = work.stages[rank_stage]
    par = scenario.parallel
    micro_batches = par.global_batch // (par.dp * par.micro_batch)
    agg: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for tag, units in (("F", stage.forward), ("B", stage.backward)):
        for unit in units:
            for op in unit:
                if isinstance(op, Op):
                    row = agg[f"{tag}:{op.name}"]
                    row[0] += op.time_s * micro_batches
                    row[1] += op.flops * micro_batches
    return agg


def show(label: str, scenario: Scenario, measured_s: float | None, ops: bool) -> None:
    rep = simulate(scenario)
    bd = rep.to_json()["breakdown"]
    head = f"{label}: predicted {rep.step_time_s:.3f} s"
    if measured_s:
        head += f", measured {measured_s:.3f} s ({rep.step_time_s / measured_s - 1:+.1%})"
    print(head)
    print("  breakdown   " + "  ".join(f"{k} {v:.3f}" for k, v in bd.items() if isinstance(v, float) and v > 5e-4))
    last = len(build_step_work(scenario).stages) - 1
    for rank_stage in sorted({0, last}):
        agg = op_table(scenario, rank_stage)
        total = sum(t for t, _ in agg.values())
        groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for name, (t, f) in agg.items():
            g = groups[group_of(name.split(":", 1)[1])]
            g[0] += t
            g[1] += f
        print(f"  compute stream of stage {rank_stage} (kernels only): {total:.3f} s")
        for g, (t, f) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
            rate = f"{f / t / 1e12:6.0f} TFLOP/s" if f else ""
            print(f"    {g:16s} {t * 1e3:9.1f} ms {t / total:6.1%}  {rate}")
        if ops:
            for name, (t, f) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
                rate = f"{f / t / 1e12:6.0f} TFLOP/s" if f else ""
                print(f"      {name:38s} {t * 1e3:9.2f} ms {t / total:6.1%}  {rate}")
    plan = dp_plan(scenario, build_step_work(scenario))
    items: list[tuple[str, object]] = []
    for group in (plan.grad_buckets, plan.after_backward, plan.param_gathers, plan.after_optimizer):
        for key, its in group.items():
            if (key if isinstance(key, int) else key[0]) == 0:   # stage 0's rank
                items.extend(its)
    if plan.zero3 is not None:
        for group in (plan.zero3.gather, plan.zero3.reduce):
            for key, its in group.items():
                if key[0] == 0:
                    items.extend(its)
    seen: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for what, coll in items:
        row = seen[f"{coll.op} ({what})"]
        row[0] += 1
        row[1] += coll.size_bytes
        row[2] += coll.time_s
    for name, (n, size, t) in seen.items():
        print(f"  dp traffic of stage 0  {name:30s} {int(n):4d} x, {size / 1e9:7.2f} GB, {t:.3f} s alone on the link")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="+", help="reference run name substrings or scenario YAML files")
    ap.add_argument("--ops", action="store_true", help="list every op, not only the groups")
    args = ap.parse_args()
    runs = reference_runs()
    for what in args.what:
        if what.endswith((".yaml", ".yml")):
            show(what, load_scenario(Path(what)), None, args.ops)
            continue
        for r in runs:
            if what in r.name:
                show(r.name, scenario_from_dict(r.scenario), r.measured_step_time_s, args.ops)


if __name__ == "__main__":
    main()
