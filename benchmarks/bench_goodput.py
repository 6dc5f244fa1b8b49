"""Wall time of `clustersim goodput` (simulator speed, not a test).

    python benchmarks/bench_goodput.py

For each case: the whole command's wall time with start-up (median of 3 processes, the step from
the event engine as `clustersim goodput` does by default), and in-process the time of
`goodput_report` alone (failure model, checkpoint model, interval search, 200 Monte-Carlo runs)
once the step is known. Acceptance: the Llama 3 405B run (16,384 H100, 54 days) in under 10 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("llama3_8b_h200x8.yaml", 30),
    ("gpt3_175b_a100x1024.yaml", 34),
    ("llama3_405b_h100x16384.yaml", 54),
    ("llama3_405b_h100x16384.yaml", 365),
]


def command_wall_s(scenario: str, days: float) -> float:
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "clustersim", "goodput", f"scenarios/{scenario}", "--days", str(days),
                        "--json"], check=True, capture_output=True, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def report_wall_s(scenario: str, days: float) -> tuple[float, int, float]:
    from clustersim.api import estimate
    from clustersim.goodput.report import goodput_report
    from clustersim.scenario import load_scenario

    step = estimate(load_scenario(ROOT / "scenarios" / scenario))
    goodput_report(step, days)  # warm numpy
    t0 = time.perf_counter()
    report = goodput_report(step, days)
    return time.perf_counter() - t0, report.num_gpus, report.to_json()["interruptions"]


def main() -> None:
    sys.path.insert(0, str(ROOT))  # this checkout's clustersim, not an installed one
    table = Table(title="clustersim goodput wall time (2 cores; command: median of 3 processes with start-up)")
    for col in ("scenario", "GPUs", "days", "interruptions", "goodput_report s", "command s"):
        table.add_column(col, justify="right")
    for scenario, days in CASES:
        inproc, gpus, interruptions = report_wall_s(scenario, days)
        table.add_row(scenario, f"{gpus:,}", f"{days:g}", f"{interruptions:,.0f}", f"{inproc:.3f}",
                      f"{command_wall_s(scenario, days):.2f}")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
