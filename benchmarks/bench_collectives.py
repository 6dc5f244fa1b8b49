"""Wall time of the simulator itself for an 8 GiB all_reduce on 8, 1,024 and 16,384 GPUs.

    python benchmarks/bench_collectives.py [--preset dgx-h100]

closed: plan_collective (closed form, NCCL's algorithm choice), cache cleared first.
event cold: simulate_collective including building the networkx topology of the whole cluster.
event warm: simulate_collective with the topology already built (cached per cluster spec).
The event engine simulates one representative node (symmetry), so its cost hardly grows with
the GPU count; building the graph is what grows.
"""

from __future__ import annotations

import argparse
import time

from clustersim.collectives import GroupShape, plan_collective, simulate_collective
from clustersim.hardware.load import load_cluster
from clustersim.network.topology import build_topology

SIZE = 8 * 2**30


def _timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="dgx-h100")
    args = ap.parse_args()
    print(f"8 GiB all_reduce on {args.preset}: simulator wall time")
    print(f"{'GPUs':>6} {'algo':>10} {'sim time ms':>12} {'busbw GB/s':>11} {'closed ms':>10} "
          f"{'event cold ms':>14} {'event warm ms':>14} {'graph edges':>12}")
    for gpus in (8, 1024, 16384):
        cluster = load_cluster(args.preset, max(1, gpus // 8))
        shape = GroupShape(8, gpus // 8)
        plan_collective.cache_clear()
        build_topology.cache_clear()
        plan, closed_s = _timed(lambda c=cluster, s=shape: plan_collective("all_reduce", SIZE, c, s))
        event, cold_s = _timed(lambda c=cluster, s=shape: simulate_collective("all_reduce", SIZE, c, s))
        _, warm_s = _timed(lambda c=cluster, s=shape: simulate_collective("all_reduce", SIZE, c, s))
        edges = build_topology(cluster).number_of_edges()
        assert abs(event - plan.time_s) <= 0.01 * plan.time_s
        print(f"{gpus:>6} {plan.algo:>10} {plan.time_s * 1e3:>12.3f} {plan.busbw_bytes_per_s / 1e9:>11.1f} "
              f"{closed_s * 1e3:>10.3f} {cold_s * 1e3:>14.1f} {warm_s * 1e3:>14.3f} {edges:>12}")


if __name__ == "__main__":
    main()
