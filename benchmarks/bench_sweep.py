"""Speed of `clustersim sweep`: the full GPT-3 175B layout sweep on 1,024 A100 (128 DGX A100,
global batch 1536), with layouts per second, time per phase, the top 5 and the hand-picked
Megatron layout (TP8 PP8 DP16, micro-batch 1; Narayanan et al. 2021, Table 1) for comparison.

    python benchmarks/bench_sweep.py [--executor local|dask|serial] [--workers N] [--set KEY=VALUE] [SCENARIO]

The MoE acceptance line (issue 9): Mixtral 8x22B on 1,024 H100, EP x ETP, the zero-bubble and
DualPipe schedules and optimizer offload in the space:

    PYTHONPATH=. python benchmarks/bench_sweep.py scenarios/mixtral_8x22b_h100x256.yaml \
        --set cluster.nodes=128 --set parallel.dp=128 --set parallel.global_batch=1024

Prints a table; nothing is asserted (timings depend on the machine).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from clustersim import api
from clustersim.scenario import load_scenario
from clustersim.sweep.executors import make_executor
from clustersim.sweep.runner import run_sweep, sweep_spec
from clustersim.sweep.space import count_layouts

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "scenarios" / "gpt3_175b_a100x1024.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="?", default=str(DEFAULT))
    ap.add_argument("--executor", default="local", choices=("local", "dask", "serial"))
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--rerank", type=int, default=8)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario field")
    args = ap.parse_args()

    scenario = load_scenario(args.scenario, args.set)
    spec = sweep_spec(scenario)
    phases: dict[str, list[float]] = {}

    def progress(phase: str, done: int, total: int) -> None:
        now = time.perf_counter()
        phases.setdefault(phase, [now, now])[1] = now

    started = time.perf_counter()
    pool = make_executor(args.executor, None, args.workers)
    ready = time.perf_counter()
    try:
        result = run_sweep(spec, pool, rerank=args.rerank, keep=10, progress=progress)
    finally:
        pool.close()
    total_s = time.perf_counter() - started
    hand = api.simulate(scenario)

    s = spec.scenario
    print(f"# {s.model.name} on {s.cluster.num_gpus} x {s.cluster.gpu.name} ({s.cluster.name}), "
          f"global batch {s.parallel.global_batch}; executor {args.executor}, "
          f"{getattr(pool, 'workers', 1)} workers, {os.cpu_count()} cores")
    print(f"{'layouts in the space':32s} {count_layouts(s.model, s.cluster, s.parallel):>12,d}")
    print(f"{'layouts screened':32s} {result.evaluated:>12,d}")
    print(f"{'  fit in memory':32s} {result.fitting:>12,d}")
    print(f"{'  evaluated in closed form':32s} {result.estimated:>12,d}")
    print(f"{'  re-ranked by the event engine':32s} {result.simulated:>12,d}")
    print(f"{'pool start (s)':32s} {ready - started:>12.2f}")
    for phase, (t0, t1) in phases.items():
        print(f"{phase + ' phase (s)':32s} {t1 - t0:>12.2f}")
    print(f"{'total sweep time (s)':32s} {total_s:>12.2f}")
    print(f"{'layouts per second':32s} {result.evaluated / total_s:>12,.0f}")
    print()
    print(f"{'#':>2} {'tp':>3} {'pp':>3} {'dp':>4} {'cp':>3} {'mb':>3} {'zero':>4} {'recompute':>9} {'sp':>2} "
          f"{'schedule':>22} {'step s':>8} {'MFU':>6} {'tokens/s':>10} {'peak GiB':>8}")
    for i, row in enumerate(result.top(5), start=1):
        p = row["parallel"]
        sched = f"{p['schedule']}" + (f" v{p['virtual_stages']}" if p["virtual_stages"] > 1 else "")
        print(f"{i:>2} {p['tp']:>3} {p['pp']:>3} {p['dp']:>4} {p['cp']:>3} {p['micro_batch']:>3} {p['zero_stage']:>4} "
              f"{p['recompute']:>9} {'y' if p['sequence_parallel'] else 'n':>2} {sched:>22} "
              f"{row['step_time_s']:>8.3f} {row['mfu']:>6.1%} {row['tokens_per_s']:>10,.0f} "
              f"{row['peak_bytes_per_gpu'] / 2**30:>8.1f}")
    p = scenario.parallel
    print(f"{'hand':>2} {p.tp:>3} {p.pp:>3} {p.dp:>4} {p.cp:>3} {p.micro_batch:>3} {p.zero_stage:>4} "
          f"{p.recompute:>9} {'y' if p.sequence_parallel else 'n':>2} {p.schedule:>22} {hand.step_time_s:>8.3f} "
          f"{hand.mfu:>6.1%} {hand.tokens_per_s:>10,.0f} {hand.memory.peak_bytes_per_gpu / 2**30:>8.1f}")


if __name__ == "__main__":
    main()
