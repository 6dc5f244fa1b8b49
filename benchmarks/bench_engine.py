"""Engine speed, the public closed-form call and per-rank mode (simulator speed, not a test).

    python benchmarks/bench_engine.py [--repeat 5] [--calls 50] [--only estimate|sections]

In-process, one Python process: each engine call is timed ``--repeat`` times and the median is
printed, after a first (cold) call that builds the step plan and keeps it in the run's memo
(clustersim.plan.plan_cache.PlanCache, handed to every call; the table shows that first call too). Rows:

* the event engine (`clustersim.engine.selector.simulate_step`, no trace recording) and the closed form
  (`clustersim.engine.selector.estimate_step`) on GPT-3 175B, 1,024 A100 (TP8 PP8 DP16, global
  batch 1536: scenarios/gpt3_175b_a100x1024.yaml) and on the 1T-parameter SC21 layout (Narayanan
  et al. 2021, arXiv 2104.04473, Table 1: megatron-1t, 3,072 A100, TP8 PP64 DP6, global batch 3072);
* the public closed-form call, ``api.estimate`` and the report's interval (step time, memory and
  interval: what a sweep or the web app asks for), median of ``--calls`` calls, in two warm modes:

  (a) *fresh*: a warm process (imports done, the pure functions' lru memos of hardware, compute and
      collectives warm), each call on a freshly built Scenario (``scenario_from_dict`` of the file,
      not timed) and a fresh PlanCache (the one ``api.estimate`` makes when handed none): what a
      sweep or the web app pays for a layout it has not planned in this run;
  (b) *kept*: the same Scenario again with its PlanCache kept (the plan and its compiled units
      are reused; the timing model, memory plan and interval still run).

  The targets, 1 ms and 2 ms, are on (a). Cases: GPT-3 175B on 1,024 A100 (TP8 PP8 DP16,
  micro-batch 1, global batch 1536, full recompute, 1F1B as scenarios/gpt3_175b_a100x1024.yaml,
  with the framework and ZeRO stage the file sets taken out, so both are at their defaults) and
  the SC21 1T row as above (the file's framework, megatron-legacy, and ZeRO 0 kept).
* with ``--only sections``: where one fresh public call of each case goes, its parts timed one by
  one in the order ``api.estimate`` runs them (the step budget, which compiles the units the plan
  reuses; the plan build; the timing model; the report with memory and interval), min and median
  of ``--calls``, beside the whole call; the parts' step time must equal the call's.
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

from clustersim import api  # noqa: E402
from clustersim.api import estimate, simulate  # noqa: E402
from clustersim.engine.selector import estimate_step, simulate_step, time_plan  # noqa: E402
from clustersim.plan.budget import check_step_budget  # noqa: E402
from clustersim.plan.plan_cache import PlanCache  # noqa: E402
from clustersim.scenario import load_scenario, read_scenario_dict, scenario_from_dict  # noqa: E402
from clustersim.scenario.loader import apply_overrides  # noqa: E402

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


def gpt3_line() -> dict:
    """GPT-3 175B as the speed line states it: the shipped file with framework and ZeRO at their defaults."""
    raw = read_scenario_dict(GPT3)
    raw.pop("framework", None)
    raw["parallel"] = {k: v for k, v in raw["parallel"].items() if k != "zero_stage"}
    return raw


def public_call(scenario, cache: PlanCache | None = None) -> float:
    """``api.estimate`` and the report's interval: step time, memory and interval. Returns the step time."""
    report = estimate(scenario, cache)
    report.interval  # noqa: B018 - a property that computes the interval
    return report.step_time_s


def time_public_call(raw: dict, calls: int) -> dict[str, object]:
    """Medians (s) of ``calls`` public calls per warm mode (module docstring), after one warm-up call."""
    public_call(scenario_from_dict(raw))
    fresh = []
    for _ in range(calls):
        sc = scenario_from_dict(raw)   # not timed: the caller has its scenario
        t0 = time.perf_counter()
        step = public_call(sc)
        fresh.append(time.perf_counter() - t0)
    sc, cache = scenario_from_dict(raw), PlanCache()
    public_call(sc, cache)
    kept = []
    for _ in range(calls):
        t0 = time.perf_counter()
        public_call(sc, cache)
        kept.append(time.perf_counter() - t0)
    return {"fresh": fresh, "kept": kept, "step_time_s": step}


def estimate_table(calls: int) -> Table:
    table = Table(title=f"api.estimate + interval in-process, median of {calls} calls (ms; min-max of the calls)")
    for col in ("case", "warm mode", "median ms", "min-max ms", "target ms", "step time s"):
        table.add_column(col, justify="right")
    for label, raw, target in (("GPT-3 175B, 1,024 A100", gpt3_line(), 1.0),
                               ("1T SC21, 3,072 A100", apply_overrides(read_scenario_dict(GPT3), SC21_1T), 2.0)):
        out = time_public_call(raw, calls)
        for mode, text in (("fresh", "(a) fresh Scenario + PlanCache"), ("kept", "(b) same Scenario, PlanCache kept")):
            runs = out[mode]
            table.add_row(label, text, f"{statistics.median(runs) * 1e3:.3f}",
                          f"{min(runs) * 1e3:.3f}-{max(runs) * 1e3:.3f}", f"<= {target:g}" if mode == "fresh" else "",
                          f"{out['step_time_s']:.3f}")
    return table


def _report_and_interval(scenario, result):
    """``api.estimate``'s last part: the report (memory included) and its interval."""
    report = api._report(scenario, "analytical", result.step_time_s, result.breakdown, result.critical_rank)
    report.interval  # noqa: B018 - a property that computes the interval
    return report


def sections_table(calls: int) -> Table:
    """The public call of each case in parts (module docstring), min and median ms of ``calls``."""
    table = Table(title=f"api.estimate + interval in parts, fresh Scenario + PlanCache, {calls} calls (ms)")
    for col in ("case", "part", "min ms", "median ms"):
        table.add_column(col, justify="right")
    for label, raw in (("GPT-3 175B, 1,024 A100", gpt3_line()),
                       ("1T SC21, 3,072 A100", apply_overrides(read_scenario_dict(GPT3), SC21_1T))):
        whole_step = public_call(scenario_from_dict(raw))
        parts: dict[str, list[float]] = {}

        def timed(name: str, fn: Callable[[], object], parts: dict[str, list[float]] = parts) -> object:
            t0 = time.perf_counter()
            out = fn()
            parts.setdefault(name, []).append(time.perf_counter() - t0)
            return out

        for _ in range(calls):
            sc0, cache = scenario_from_dict(raw), PlanCache()
            t0 = time.perf_counter()
            sc = api.balanced(sc0)
            timed("step budget (compiles the units)", lambda sc=sc, cache=cache: check_step_budget(sc, "analytical", cache.compiler))
            api._schedule(sc)
            plan = timed("plan build", lambda sc=sc, cache=cache: cache.step_plan(sc))
            res = timed("timing model (closed form)", lambda plan=plan: time_plan(plan, "analytical", False))
            rep = timed("report, memory and interval", lambda sc=sc, res=res: _report_and_interval(sc, res))
            parts.setdefault("the whole call", []).append(time.perf_counter() - t0)
            assert rep.step_time_s == whole_step, (rep.step_time_s, whole_step)
        for name, runs in parts.items():
            table.add_row(label, name, f"{min(runs) * 1e3:.3f}", f"{statistics.median(runs) * 1e3:.3f}")
    return table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50, help="calls per warm mode of the api.estimate rows")
    ap.add_argument("--only", choices=("estimate", "sections"),
                    help="only the api.estimate rows, or only that call in parts")
    args = ap.parse_args()
    console = Console(width=160)
    console.print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
                  f"{os.getloadavg()[2]:.2f} on {os.cpu_count()} cores")
    console.print(sections_table(args.calls) if args.only == "sections" else estimate_table(args.calls))
    if args.only in ("estimate", "sections"):
        console.print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
                      f"{os.getloadavg()[2]:.2f}")
        return
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
