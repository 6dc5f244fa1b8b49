"""Speed of `clustersim sweep` and `clustersim compare`: the acceptance lines of issues 9 and 10.

    PYTHONPATH=. python benchmarks/bench_sweep.py                 # the three lines below
    PYTHONPATH=. python benchmarks/bench_sweep.py --only gpt3     # one of gpt3, mixtral, compare
    PYTHONPATH=. python benchmarks/bench_sweep.py --detail        # also the GPT-3 phases and top 5

1. ``clustersim sweep scenarios/gpt3_175b_a100x1024.yaml`` (GPT-3 175B on 1,024 A100);
2. ``clustersim sweep scenarios/mixtral_8x22b_h100x256.yaml --gpus 1024`` (Mixtral 8x22B on 1,024
   H100: EP x ETP, the zero-bubble and DualPipe schedules and optimizer offload in the space);
3. ``clustersim compare scenarios/llama3_70b_h100x512.yaml --clusters dgx-h100,hgx-h200,dgx-b200,
   gb200-nvl72,mi300x`` (one sweep per cluster, re-rank 1).

Each runs as the CLI runs it (a local pool of all cores; compare: one serial sweep per cluster in
the pool) and prints: layouts screened, unit-time classes the screen priced (compiled units,
the bound's first level) and those of the layouts the branch and bound refined (the second
level's stream terms, MoE models only), layouts refined, closed-form evaluations, event-engine runs, wall seconds, and CPU seconds of this
process and its workers together (``resource.getrusage``: RUSAGE_SELF + RUSAGE_CHILDREN), then
the load average. The compare line's counts come from its sweeps run again in this process after
the timed run (sums over the clusters). Nothing is asserted: timings depend on the machine and
its load.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from clustersim import api
from clustersim.api import SWEEP_EVALUATORS
from clustersim.errors import InputError
from clustersim.scenario import load_scenario
from clustersim.sweep.executors import SerialExecutor, make_executor
from clustersim.sweep.runner import SweepResult, run_sweep, sweep_spec

ROOT = Path(__file__).resolve().parents[1]
GPT3 = ROOT / "scenarios" / "gpt3_175b_a100x1024.yaml"
MIXTRAL = ROOT / "scenarios" / "mixtral_8x22b_h100x256.yaml"
LLAMA = ROOT / "scenarios" / "llama3_70b_h100x512.yaml"
CLUSTERS = ["dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72", "mi300x"]


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed_sweep(path: Path, gpus: int | None, workers: int | None) -> tuple[SweepResult, float, float]:
    """A sweep as `clustersim sweep` runs it (rerank 8, keep 10, a local pool)."""
    wall, cpu = time.perf_counter(), cpu_s()
    spec = sweep_spec(load_scenario(str(path), ()), gpus, evaluators=SWEEP_EVALUATORS)
    pool = make_executor("local", None, workers)
    try:
        result = run_sweep(spec, pool, rerank=8, keep=10)
    finally:
        pool.close()
    return result, time.perf_counter() - wall, cpu_s() - cpu


def counts(results: list[SweepResult]) -> tuple[int, int, int, int, int, int]:
    return (sum(r.evaluated for r in results), sum(r.classes() for r in results),
            sum(r.classes(refined_only=True) for r in results), sum(r.refined for r in results),
            sum(r.estimated for r in results), sum(r.simulated for r in results))


def compare_line(workers: int | None) -> tuple[tuple[int, ...], float, float]:
    from clustersim.sweep.compare import cluster_size, compare_cluster, scenario_on
    from clustersim.sweep.compare_rows import compare_rows
    from clustersim.sweep.evaluate import SweepSpec
    from clustersim.sweep.space import SearchSpace

    wall, cpu = time.perf_counter(), cpu_s()
    compare_rows(str(LLAMA), (), CLUSTERS, None, 1e12, {}, "local", None, workers, 1,
                 evaluators=SWEEP_EVALUATORS)
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    base = load_scenario(str(LLAMA), ())
    results = []
    for preset in CLUSTERS:  # the same sweeps, again, for their counts
        scenario = scenario_on(base, compare_cluster(preset, cluster_size(preset, base.cluster.num_gpus)))
        results.append(run_sweep(SweepSpec(scenario, SearchSpace(), evaluators=SWEEP_EVALUATORS), SerialExecutor(),
                                     rerank=1, keep=1))
    return counts(results), wall, cpu


def detail(result: SweepResult, path: Path) -> None:
    scenario = load_scenario(str(path), ())
    hand = api.simulate(scenario)
    print(f"\n{'#':>2} {'tp':>3} {'pp':>3} {'dp':>4} {'cp':>3} {'mb':>3} {'zero':>4} {'recompute':>9} {'sp':>2} "
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("gpt3", "mixtral", "compare"), action="append")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores)")
    ap.add_argument("--detail", action="store_true", help="print the GPT-3 sweep's top 5 and the hand-picked layout")
    args = ap.parse_args()
    which = args.only or ["gpt3", "mixtral", "compare"]

    print(f"# {os.cpu_count()} cores, local pool of {args.workers or os.cpu_count()} workers")
    print(f"{'scenario':34s} {'layouts':>10} {'classes 1st':>11} {'classes 2nd':>11} {'refined':>8} "
          f"{'closed form':>11} {'event eng.':>10} {'wall s':>7} {'CPU s':>7}")
    gpt3 = None
    for name in which:
        if name == "compare":
            c, wall, cpu = compare_line(args.workers)
            label = "compare llama3-70b x 5 clusters"
        else:
            path, gpus = (GPT3, None) if name == "gpt3" else (MIXTRAL, 1024)
            label = "sweep gpt3-175b 1024 x a100" if name == "gpt3" else "sweep mixtral-8x22b 1024 x h100"
            try:
                result, wall, cpu = timed_sweep(path, gpus, args.workers)
            except InputError as exc:  # over a limit (clustersim.limits): what the CLI says, exit 2
                print(f"{label:34s} refused: {exc}", flush=True)
                continue
            gpt3 = result if name == "gpt3" else gpt3
            c = counts([result])
        print(f"{label:34s} {c[0]:>10,d} {c[1]:>11,d} {c[2]:>11,d} {c[3]:>8,d} {c[4]:>11,d} {c[5]:>10,d} "
              f"{wall:>7.1f} {cpu:>7.1f}", flush=True)
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.detail and gpt3 is not None:
        detail(gpt3, GPT3)


if __name__ == "__main__":
    main()
