"""Megatron-Core's host time per transformer layer on this CPU: the figures of
clustersim.compute.host ``MEGATRON_LAYER_HOST_S`` (simulator input, not a test).

    pip install megatron-core==0.16.1      # not a clustersim dependency
    python benchmarks/host_megatron.py [--rounds 3]

Each configuration runs in its own process (benchmarks/host_megatron_layer.py patches torch.cuda):
a dense layer and a MoE layer (16 experts, top-8, grouped GEMM, alltoall dispatcher) at 4
tokens, forward and backward, median of 5 x 30 iterations per round; the table gives the median
over rounds, and the host time without the CPU's own loop over the experts inside the grouped
GEMM (``gmm``: on a GPU that GEMM is its kernel launches, which clustersim counts apart). The
machine's load average is printed: the figures mean little on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {"dense": ["--kind", "dense"],
         "moe (16 experts, top-8)": ["--kind", "moe", "--grouped", "--experts", "16", "--topk", "8"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'layer':26s} {'forward ms':>11s} {'backward ms':>12s} {'gmm fwd/bwd ms':>15s} "
          f"{'host fwd ms':>12s} {'host bwd ms':>12s}")
    for name, flags in CASES.items():
        rows = []
        for _ in range(args.rounds):
            out = subprocess.run([sys.executable, str(HERE / "host_megatron_layer.py"), *flags, "--tokens", "4",
                                  "--iters", "30", "--repeats", "5"], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        f, b = (statistics.median(r[k] for r in rows) for k in ("fwd_ms_median", "bwd_ms_median"))
        gf, gb = (statistics.median(r[k] for r in rows) for k in ("fwd_gmm_ms_median", "bwd_gmm_ms_median"))
        print(f"{name:26s} {f:11.3f} {b:12.3f} {gf:7.3f}/{gb:<7.3f} {f - gf:12.3f} {b - gb:12.3f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
