"""Issue 11 acceptance figures: engine speed and per-rank mode (simulator speed, not a test).

    python benchmarks/bench_engine.py [--repeat 5]

In-process, one Python process: each engine call is timed ``--repeat`` times and the median is
printed, after a first (cold) call that builds the step plan and keeps it in the run's memo
(clustersim.plan.plan_cache.PlanCache, handed to every call; the table shows that first call too). Rows:

* the event engine (`clustersim.engine.selector.simulate_step`, no trace recording) and the closed form
  (`clustersim.engine.selector.estimate_step`) on GPT-3 175B, 1,024 A100 (TP8 PP8 DP16, global
  batch 1536: scenarios/gpt3_175b_a100x1024.yaml) and on the 1T-parameter SC21 layout (Narayanan
  et al. 2021, arXiv 2104.04473, Table 1: megatron-1t, 3,072 A100, TP8 PP64 DP6, global batch 3072);
* per-rank mode: Llama-3-405B on 16,384 H100 (scenarios/llama3_405b_h100x16384.yaml) with 1% of
  the GPUs drawn as stragglers at 1.3x (``faults.stragglers``, seed 0): the whole `api.simulate`
  (per-rank event engine + per-rank closed form + report), and `clustersim run --json` in a fresh
  process, start-up included.

The machine's load average is printed with the table: the figures mean little on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # this checkout's clustersim, not an installed one

from clustersim.api import simulate  # noqa: E402
from clustersim.engine.selector import estimate_step, simulate_step  # noqa: E402
from clustersim.plan.plan_cache import PlanCache  # noqa: E402
from clustersim.scenario import load_scenario, read_scenario_dict, scenario_from_dict  # noqa: E402

GPT3 = ROOT / "scenarios" / "gpt3_175b_a100x1024.yaml"
LLAMA405 = ROOT / "scenarios" / "llama3_405b_h100x16384.yaml"
# SC21 Table 1, 1T row: 128 layers, hidden 25600, 160 heads; TP 8, PP 64, 3,072 GPUs, batch 3072
SC21_1T = ["model.preset=megatron-1t", "cluster.nodes=384", "parallel.pp=64", "parallel.dp=6",
           "parallel.global_batch=3072", "name=megatron-1t tp8 pp64 dp6 on 3072 A100"]
STRAGGLERS = {"stragglers": {"fraction": 0.01, "slowdown": 1.3}, "seed": 0}


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(first call s, median of ``repeat`` further calls s)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return first, statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    console = Console(width=160)
    console.print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
                  f"{os.getloadavg()[2]:.2f} on {os.cpu_count()} cores")
    table = Table(title=f"engine wall time in-process (first call; median of {args.repeat} more)")
    for col in ("case", "engine", "first s", "median s", "target s", "step time s"):
        table.add_column(col, justify="right")
    gpt3 = load_scenario(GPT3)
    one_t = load_scenario(GPT3, SC21_1T)
    for label, sc, target_event in (("GPT-3 175B, 1,024 A100", gpt3, 0.1), ("1T SC21, 3,072 A100", one_t, 1.0)):
        cache = PlanCache()
        step = simulate_step(sc, record=False, cache=cache).step_time_s
        first, med = _timed(lambda sc=sc, cache=cache: simulate_step(sc, record=False, cache=cache), args.repeat)
        table.add_row(label, "event", f"{first:.4f}", f"{med:.4f}", f"< {target_event:g}", f"{step:.3f}")
        step = estimate_step(sc, cache=cache).step_time_s
        first, med = _timed(lambda sc=sc, cache=cache: estimate_step(sc, cache=cache), args.repeat)
        table.add_row(label, "closed form", f"{first:.4f}", f"{med:.4f}", "< 0.002", f"{step:.3f}")
    raw = read_scenario_dict(LLAMA405)
    faulty = scenario_from_dict({**raw, "faults": STRAGGLERS})
    runs = []
    for _ in range(args.repeat):   # each call on a fresh copy of the scenario: no memo hits across calls
        sc = scenario_from_dict({**raw, "faults": STRAGGLERS})
        t0 = time.perf_counter()
        rep = simulate(sc)
        runs.append(time.perf_counter() - t0)
    table.add_row("Llama-3-405B, 16,384 H100, 1% stragglers 1.3x", "per-rank api.simulate", f"{runs[0]:.2f}",
                  f"{statistics.median(runs):.2f}", "< 60", f"{rep.step_time_s:.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "llama405_stragglers.yaml"
        path.write_text(yaml.safe_dump({**raw, "faults": STRAGGLERS}))
        walls = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "clustersim", "run", str(path), "--json"], check=True,
                           capture_output=True, cwd=ROOT)
            walls.append(time.perf_counter() - t0)
    table.add_row("same, `clustersim run --json` (fresh process)", "per-rank CLI", f"{walls[0]:.2f}",
                  f"{statistics.median(walls):.2f}", "< 60", f"{rep.step_time_s:.3f}")
    console.print(table)
    info = rep.per_rank or {}
    console.print(f"405B on {faulty.cluster.num_gpus:,} GPUs: healthy step {info.get('healthy_step_time_s', 0.0):.3f} s, "
                  f"with stragglers {rep.step_time_s:.3f} s (cost {info.get('cost_fraction', 0.0):.1%}); straggler "
                  f"line {rep.breakdown.get('straggler', 0.0):.3f} s; {info.get('classes')} rank classes, "
                  f"{info.get('simulated_ranks')} simulated ranks; paced by {info.get('paced_by')}")
    console.print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
