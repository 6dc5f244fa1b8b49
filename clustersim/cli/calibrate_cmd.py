"""`clustersim calibrate`: fit one machine profile from nccl-tests logs, training logs (text,
TensorBoard, CSV of step times), runs given as scenarios with their measured step times and
profiler traces of a real cluster (docs/calibration.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from clustersim.errors import InputError
from clustersim.inputs import check_distinct_files
from clustersim.limits import MAX_GPUS
from clustersim.output_file import check_output_path


@click.command("calibrate")
@click.option("--nccl-tests", "nccl_logs", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="output of all_reduce_perf, all_gather_perf, ... (repeat for several logs)")
@click.option("--log", "train_logs", multiple=True, type=click.Path(path_type=Path),
              help="a training log (Megatron-LM, torchtitan, DeepSpeed), a TensorBoard event file or a CSV of "
                   "step times; repeat for several runs")
@click.option("--config", "configs", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="the job of a --log that does not describe it (Megatron-LM command line or arguments, "
                   "torchtitan TOML, DeepSpeed JSON, or a clustersim scenario), in the order of the --log options; "
                   "'-' for none")
@click.option("--run", "run_specs", multiple=True, metavar="SCENARIO.yaml=SECONDS",
              help="a job as a scenario and its measured step time in seconds; repeat for several runs")
@click.option("--runs", "runs_csv", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="a CSV of runs: scenario, and step_time_s or tokens_per_s or mfu")
@click.option("--trace", "traces", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="a PyTorch profiler (Kineto) Chrome trace of a few training steps")
@click.option("--cluster", "base", default=None,
              help="cluster preset the machine resembles [the preset of the GPU the logs name]")
@click.option("--nodes", type=click.IntRange(min=1, max=MAX_GPUS), default=None, help="nodes of the --log runs (when a log does not say)")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="scenario field for every run (model.preset=llama3-8b, ...)")
@click.option("--name", default="calibrated", show_default=True, help="name of the calibrated cluster preset")
@click.option("--op", default=None, help="collective of an nccl-tests log that does not say (all_reduce, ...)")
@click.option("--min-size", "min_size", default="1MiB", show_default=True,
              help="nccl-tests rows below this size are reported, not fitted")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="profile file to write [NAME.yaml]")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
def calibrate(nccl_logs: tuple[Path, ...], train_logs: tuple[Path, ...], configs: tuple[Path, ...],
              run_specs: tuple[str, ...], runs_csv: tuple[Path, ...], traces: tuple[Path, ...], base: str | None,
              nodes: int | None, overrides: tuple[str, ...], name: str, op: str | None, min_size: str,
              out: Path | None, as_json: bool) -> None:
    """Fit a machine profile to a real cluster's measurements; report what changed and the
    leave-one-out errors."""
    if not (nccl_logs or train_logs or traces or run_specs or runs_csv):
        raise InputError("calibrate", None, "at least one of --nccl-tests FILE, --log FILE, --run SCENARIO=SECONDS, "
                         "--runs FILE.csv, --trace FILE")
    _check_name(name)
    inputs = [*nccl_logs, *train_logs, *configs, *runs_csv, *traces, *(s.rpartition("=")[0] for s in run_specs)]
    out = check_output_path(out if out is not None else Path(f"{name}.yaml"), "--out", inputs=inputs)
    for option, paths in (("--nccl-tests", nccl_logs), ("--log", train_logs), ("--runs", runs_csv), ("--trace", traces)):
        check_distinct_files(paths, option)
    if train_logs or traces or run_specs or runs_csv:
        from clustersim.calibrate.machine import calibrate_machine
        result = calibrate_machine(nccl_logs=list(nccl_logs), logs=list(train_logs), configs=list(configs),
                                   traces=list(traces), base=base, nodes=nodes, overrides=list(overrides),
                                   name=name, out=out, op=op, min_size_bytes=_parse_size(min_size),
                                   run_specs=list(run_specs), runs_csv=list(runs_csv))
        if as_json:
            sys.stdout.write(json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n")
        else:
            result.print_report()
        return
    from clustersim.calibrate.import_nccl import fit_nccl_tests
    from clustersim.inputs import read_text
    logs = [(p.name, read_text(p, "--nccl-tests", "an nccl-tests output file")) for p in nccl_logs]
    nccl = fit_nccl_tests(logs, base, name, out, op, _parse_size(min_size))
    if as_json:
        sys.stdout.write(json.dumps(nccl.to_json(), indent=1, sort_keys=True) + "\n")
        return
    print_nccl_report(nccl)


def print_nccl_report(nccl) -> None:  # noqa: ANN001 - NcclCalibration, imported lazily
    from rich.console import Console
    from rich.table import Table

    from clustersim import units
    d = nccl.to_json()
    out = Console(width=max(Console().width, 120))
    for i, r in enumerate(d["runs"]):
        hosts = "1 host" if r["nodes"] == 1 else f"{r['nodes']} hosts"
        out.print(f"run {i}: {r['op']} on {r['ranks']} ranks / {hosts} ({r['device']}, NCCL "
                  f"{r['nccl_version'] or '?'}) from {r['source']}; collective named by {r['op_from']}")
    for k, v in d["knobs"].items():
        unit = "GB/s" if k.endswith("bw") else "us"
        out.print(f"  {k}: {v['base']:.4g} -> {v['fitted']:.4g} {unit}")
    t = Table(title=f"nccl-tests rows predicted with the profile as written ({d['profile']})")
    # the error is the time's (predicted / measured - 1), beside the bandwidths it is read from
    for col in ("run", "op", "size", "measured busbw", "predicted busbw", "time error", "algo", "fitted"):
        t.add_column(col, justify="left" if col in ("op", "algo") else "right")
    for r in d["rows"]:
        t.add_row(str(r["run"]), r["op"], units.format_size(r["size_bytes"]), f"{r['measured_busbw_GBps']:.2f}",
                  f"{r['predicted_busbw_GBps']:.2f}", f"{r['error_pct']:+.1f}%", f"{r['algo']}/{r['protocol']}",
                  "yes" if r["fitted"] else "no")
    out.print(t)
    s = d["summary"]
    if s["rows_16MiB_plus"]:
        out.print(f"rows >= 16 MiB: {s['rows_16MiB_plus']}, median |error| {s['median_abs_err_pct_16MiB_plus']:.1f}%, "
                  f"max {s['max_abs_err_pct_16MiB_plus']:.1f}%")
    out.print(f"fitted rows: {s['rows_fitted']}, median |error| {s['fit_median_abs_err_pct']:.1f}%")
    out.print(f"profile: {d['profile']} (cluster preset {d['cluster']}; use with --profile)")


def _check_name(name: str) -> None:
    import re
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise InputError("--name", name, "letters, digits, '-', '_' and '.' (at most 64), starting with a letter or digit")
    from clustersim.hardware.load import shipped_names
    if name in shipped_names("clusters"):   # the profile would shadow the shipped preset wherever it is loaded
        raise InputError("--name", name, "a name that is not a shipped cluster preset (the calibrated preset would "
                         f"replace {name} for every scenario run with the profile): e.g. {name}-calibrated")


def _parse_size(text: str) -> int:
    from clustersim.units import parse_size_bytes
    try:
        return parse_size_bytes(text)
    except ValueError as exc:
        raise InputError("--min-size", text, str(exc)) from None
