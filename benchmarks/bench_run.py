"""Wall time of `clustersim run` against cluster size (simulator speed, not a test).

    python benchmarks/bench_run.py

Prints, for each shipped scenario and a few scaled copies, the GPU count, the number of
simulated actions, and the wall time of the event engine and of the closed-form twin (median of
3), plus the whole command's wall time with start-up for the two acceptance scenarios.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from clustersim.api import estimate, simulate
from clustersim.engine.stages import build_step_work
from clustersim.engine.zero import dp_plan
from clustersim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _time(fn, *args, repeat: int = 3) -> float:
    walls = []
    for _ in range(repeat):
        # clear the pure-function caches so each repeat pays the whole cost
        build_step_work.cache_clear()
        dp_plan.cache_clear()
        t0 = time.perf_counter()
        fn(*args)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def main() -> None:
    cases = [
        ("llama3_8b_h200x8.yaml", []),
        ("llama2_70b_a100x64.yaml", []),
        ("megatron_16b_h100x192.yaml", []),
        ("llama3_70b_h100x512.yaml", []),
        ("gpt3_175b_a100x1024.yaml", []),
        ("gpt3_175b_a100x1024.yaml", ["cluster.nodes=512", "parallel.dp=64", "parallel.global_batch=6144"]),
        ("llama3_405b_h100x16384.yaml", []),
    ]
    table = Table(title="simulation wall time vs cluster size")
    for col in ("scenario", "GPUs", "pp x micro-batches", "event engine s", "closed form s"):
        table.add_column(col, justify="right")
    for name, overrides in cases:
        sc = load_scenario(ROOT / "scenarios" / name, overrides)
        par = sc.parallel
        table.add_row(name.removesuffix(".yaml") + (" " + " ".join(overrides) if overrides else ""),
                      f"{sc.cluster.num_gpus:,}", f"{par.pp} x {par.num_micro_batches}",
                      f"{_time(simulate, sc):.3f}", f"{_time(estimate, sc):.3f}")
    Console(width=160).print(table)
    for name in ("gpt3_175b_a100x1024.yaml", "llama3_405b_h100x16384.yaml"):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "clustersim", "run", str(ROOT / "scenarios" / name), "--json"],
                       check=True, capture_output=True)
        print(f"`clustersim run scenarios/{name} --json` wall time with start-up: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
