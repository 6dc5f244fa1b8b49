"""`clustersim goodput [SCENARIO] --days D [--json] [--seed N] [--checkpoint-interval-min X] ...`."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from clustersim import units
from clustersim.api import estimate, simulate
from clustersim.cli.does_not_fit import does_not_fit_lines
from clustersim.errors import InputError
from clustersim.goodput.rates import CLASSES
from clustersim.goodput.report import GoodputReport, check_days, goodput_report
from clustersim.hardware.load import add_profile_file
from clustersim.output_file import check_output_path, write_json_atomic
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict

# CLI option -> key of the scenario's goodput: section; each value must be a finite number > 0
# (>= 0 for the restart parts).
_POSITIVE = {"--checkpoint-interval-min": "checkpoint_interval_min", "--storage-write-bw-GBps": "storage_write_bw_GBps",
             "--storage-read-bw-GBps": "storage_read_bw_GBps", "--node-storage-bw-GBps": "node_storage_bw_GBps",
             "--snapshot-bw-GBps": "snapshot_bw_GBps", "--planned-interval-h": "planned_interval_h"}
_NON_NEGATIVE = {"--detect-s": "detect_s", "--requeue-s": "requeue_s", "--init-s": "init_s"}


def _number(option: str, value: float, minimum_exclusive: bool) -> float:
    ok = math.isfinite(value) and (value > 0 if minimum_exclusive else value >= 0)
    if not ok:
        raise InputError(option, value, "a finite number > 0" if minimum_exclusive else "a finite number >= 0")
    return value


def _parse_mtbf(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or name.strip() not in CLASSES:
            raise InputError("--mtbf", item, f"CLASS=HOURS with CLASS one of {', '.join(CLASSES)}")
        try:
            hours = float(raw)
        except ValueError:
            raise InputError("--mtbf", item, "CLASS=HOURS with HOURS a finite number > 0") from None
        if not (math.isfinite(hours) and hours > 0):
            raise InputError("--mtbf", item, "CLASS=HOURS with HOURS a finite number > 0")
        if name.strip() in out:   # the last value was kept silently
            raise InputError("--mtbf", item, f"each class once ({name.strip()} is given twice)")
        out[name.strip()] = hours
    return out


def _goodput_section(data: dict[str, Any], options: dict[str, Any], mtbf: dict[str, float], no_planned: bool,
                     checkpoint: str | None, parallel_load: bool | None, trials: int | None,
                     seed: int | None) -> dict[str, Any]:
    section = data.get("goodput")
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise InputError("goodput", section, "a mapping of goodput settings (docs/goodput.md)")
    section = dict(section)
    for option, value in options.items():
        if value is not None:
            key = _POSITIVE.get(option) or _NON_NEGATIVE[option]
            section[key] = _number(option, value, option in _POSITIVE)
    if mtbf:
        base = section.get("mtbf_h") or {}
        section["mtbf_h"] = {**base, **mtbf} if isinstance(base, dict) else base
    if no_planned:
        section["planned_interval_h"] = None
    for key, value in (("checkpoint", checkpoint), ("parallel_load", parallel_load), ("trials", trials),
                       ("seed", seed)):
        if value is not None:
            section[key] = value
    return section


def _sec(seconds: float) -> str:
    """Seconds as every line of the report prints them: a tenth below 10 s, whole above."""
    return f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}"


def _render(r: GoodputReport) -> None:
    j = r.to_json()
    out = Console(width=110)
    sc = r.step.scenario
    mc = j["monte_carlo"]
    out.print(f"[bold]{sc.name}[/bold]")
    out.print(f"  {r.days:g} days on {r.num_gpus:,} {sc.cluster.gpu.name} ({sc.cluster.num_nodes:,} nodes), "
              f"step {r.step.step_time_s:.3f} s ({r.step.engine} engine)")
    t = Table(show_header=False, box=None)
    g = mc["goodput"]
    t.add_row("goodput", f"{j['goodput']:.1%}  (Monte-Carlo p10-p90 {g['p10']:.1%}-{g['p90']:.1%}, "
                         f"{mc['trials']} runs, seed {mc['seed']})")
    if not g["p10"] <= j["goodput"] <= g["p90"]:   # the headline is the expectation over many such runs
        if j["interruptions"] <= 3:
            t.add_row("", "the headline is the long-run expectation (Daly); in a window this short most runs see "
                          "no failure or one, so read the Monte-Carlo range")
        else:   # thousands of interruptions: not a short window, but runs that start fresh and stop at its end
            t.add_row("", "the headline is the long-run expectation (Daly); the Monte-Carlo runs start fresh and "
                          "stop at the window's end, so read their range for this window")
    i = mc["interruptions"]
    t.add_row("interruptions", f"{j['interruptions']:.0f}  (p10-p90 {i['p10']:.0f}-{i['p90']:.0f}); "
                               f"job MTBF {j['job_mtbf_h']:.2f} h")
    t.add_row("effective training", f"{j['effective_training_days']:.1f} of {r.days:g} days, "
                                    f"{j['steps']:,.0f} steps, {j['tokens'] / 1e12:.2f}T tokens")
    t.add_row("lost GPU-hours", f"{j['lost_gpu_hours']:,.0f}")
    t.add_row("checkpoint interval", f"{j['checkpoint_interval_min']:.1f} min ({j['checkpoint_interval_steps']} steps); "
                                     f"best {j['optimal_checkpoint_interval_min']:.1f} min "
                                     f"(goodput {j['optimal_goodput']:.1%}); Young {j['young_interval_min']:.1f}, "
                                     f"Daly {j['daly_interval_min']:.1f} min")
    c = j["checkpoint"]
    t.add_row("checkpoint", f"{c['mode']}: {c['size_bytes'] / units.TB:.2f} TB, {c['per_gpu_bytes'] / units.GiB:.2f} GiB "
                            f"per GPU; blocks {c['blocking_s']:.2f} s, write {_sec(c['write_s'])} s, "
                            f"load {_sec(c['load_s'])} s")
    rs = j["restart_s"]
    t.add_row("restart", f"{rs['after_failure'] / 60:.1f} min after a failure (detect {_sec(rs['detect'])} s, "
                         f"re-queue {_sec(rs['requeue'])} s, init {_sec(rs['init'])} s, load {_sec(rs['load'])} s)")
    out.print(t)
    by = Table(title="interruptions by cause (expected)")
    for col in ("cause", "components", "MTBF h", "interruptions"):
        by.add_column(col, justify="left" if col == "cause" else "right")
    for cls in r.classes:
        by.add_row(cls.name, f"{cls.count:,}", f"{cls.mtbf_h:,.0f}", f"{j['interruptions_by_cause'][cls.name]:.1f}")
    planned = j["planned_interval_h"]
    by.add_row("planned", "job", f"{planned:,.1f}" if planned else "-", f"{j['interruptions_by_cause']['planned']:.1f}")
    out.print(by)
    lost = Table(title="where the lost time goes")
    lost.add_column("cause")
    lost.add_column("hours", justify="right")
    lost.add_column("share of the run", justify="right")
    for cause, hours in j["lost_hours"].items():
        lost.add_row(cause, f"{hours:,.1f}", f"{hours / (r.days * 24):.1%}")
    out.print(lost)


@click.command("goodput")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--days", type=float, required=True, help="Length of the run in days (wall time).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="Also write the JSON to FILE (atomically).")
@click.option("--seed", type=click.IntRange(min=0), help="Monte-Carlo seed (default 0, or goodput.seed).")
@click.option("--trials", type=click.IntRange(1, 10_000), help="Monte-Carlo runs (default 200).")
@click.option("--checkpoint-interval-min", type=float,
              help="Training minutes between checkpoints (default: the interval that maximises goodput).")
@click.option("--checkpoint", type=click.Choice(["sync", "async"]), help="Checkpointing: sync (default) or async.")
@click.option("--storage-write-bw-GBps", "storage_write", type=float, help="Aggregate storage write GB/s (default 2000).")
@click.option("--storage-read-bw-GBps", "storage_read", type=float, help="Aggregate storage read GB/s (default: write).")
@click.option("--node-storage-bw-GBps", "node_storage", type=float, help="Storage GB/s of one node (default: no limit).")
@click.option("--snapshot-bw-GBps", "snapshot", type=float, help="GPU-to-host GB/s per GPU (default: the cluster's host link, NVLink-C2C on GB200, else its PCIe).")
@click.option("--parallel-load/--no-parallel-load", default=None,
              help="Read each checkpoint shard once and exchange it (Megatron --ckpt-fully-parallel-load).")
@click.option("--detect-s", type=float, help="Seconds until a failure stops the job (default 100).")
@click.option("--requeue-s", type=float, help="Seconds to re-queue onto healthy nodes (default 300).")
@click.option("--init-s", type=float, help="Seconds for process start and NCCL set-up (default 120).")
@click.option("--mtbf", multiple=True, metavar="CLASS=HOURS",
              help=f"MTBF of one component in hours; CLASS: {', '.join(CLASSES)}.")
@click.option("--planned-interval-h", type=float, help="Mean hours between planned interruptions (default 27.6).")
@click.option("--no-planned", is_flag=True, help="No planned interruptions.")
@click.option("--engine", type=click.Choice(["event", "analytical"]), default="event", show_default=True,
              help="Step time from the event engine or the closed-form twin.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario field.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML.")
def goodput(scenario: str | None, days: float, as_json: bool, out_file: str | None, seed: int | None,
            trials: int | None, checkpoint_interval_min: float | None, checkpoint: str | None,
            storage_write: float | None, storage_read: float | None, node_storage: float | None,
            snapshot: float | None, parallel_load: bool | None, detect_s: float | None, requeue_s: float | None,
            init_s: float | None, mtbf: tuple[str, ...], planned_interval_h: float | None, no_planned: bool,
            engine: str, overrides: tuple[str, ...], profiles: tuple[str, ...]) -> None:
    """A whole training run of SCENARIO over --days with failures, checkpoints and restarts:
    goodput, interruptions, lost GPU-hours and the checkpoint interval that maximises goodput."""
    check_days(days)
    if out_file is not None:
        check_output_path(out_file, "--out", inputs=[p for p in (scenario, *profiles) if p is not None])
    if no_planned and planned_interval_h is not None:
        raise InputError("--no-planned", True, "either --no-planned or --planned-interval-h, not both")
    for p in profiles:
        add_profile_file(p)
    options = {"--checkpoint-interval-min": checkpoint_interval_min, "--storage-write-bw-GBps": storage_write,
               "--storage-read-bw-GBps": storage_read, "--node-storage-bw-GBps": node_storage,
               "--snapshot-bw-GBps": snapshot, "--planned-interval-h": planned_interval_h,
               "--detect-s": detect_s, "--requeue-s": requeue_s, "--init-s": init_s}
    data = apply_overrides(read_scenario_dict(scenario), overrides)
    data["goodput"] = _goodput_section(data, options, _parse_mtbf(mtbf), no_planned, checkpoint, parallel_load,
                                       trials, seed)
    sc = scenario_from_dict(data)
    step = estimate(sc) if engine == "analytical" else simulate(sc)
    report = goodput_report(step, days)
    result = report.to_json()
    if out_file is not None:
        write_json_atomic(out_file, result)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif step.memory.fits:
        _render(report)
    else:  # a job that cannot start has no goodput to show
        click.echo(f"{sc.name}: no run to simulate: this layout does not fit in GPU memory")
    if not step.memory.fits:
        for line in does_not_fit_lines(step.memory, step.num_gpus, scenario, overrides, profiles, job=step.scenario):
            click.echo(line, err=True)
        sys.exit(3)


__all__ = ["goodput"]
