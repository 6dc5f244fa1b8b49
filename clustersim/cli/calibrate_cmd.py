"""`clustersim calibrate --nccl-tests FILE`: fit a fabric profile to nccl-tests output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from clustersim.errors import InputError


@click.command("calibrate")
@click.option("--nccl-tests", "log", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="output of all_reduce_perf (or all_gather_perf, ...) from nccl-tests")
@click.option("--cluster", "base", default="dgx-a100", show_default=True,
              help="cluster preset the log's machine resembles (its other fabric and GPUs are kept)")
@click.option("--name", default="calibrated-nccl", show_default=True, help="name of the fitted fabric and cluster")
@click.option("--op", default=None, help="collective of the log when it does not say (all_reduce, all_gather, ...)")
@click.option("--min-size", "min_size", default="0", show_default=True,
              help="ignore rows below this size (bytes; suffixes KiB, MiB, ... accepted)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="profile file to write [NAME.yaml]")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
def calibrate(log: Path, base: str, name: str, op: str | None, min_size: str, out: Path | None, as_json: bool) -> None:
    """Fit latency and bandwidth of a fabric to a real cluster's nccl-tests results."""
    from clustersim.calibrate.import_nccl import fit_nccl_tests
    from clustersim.inputs import read_text
    text = read_text(log, "--nccl-tests", "an nccl-tests output file")
    result = fit_nccl_tests(text, base, name, out or Path(f"{name}.yaml"), op,
                            _parse_size(min_size), source=log.name)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n")
        return
    d = result.to_json()
    f = d["fabric"]
    click.echo(f"{d['op']}: {d['ranks']} ranks on {d['nodes']} hosts ({d['device']}, NCCL {d['nccl_version']}), "
               f"{d['points']} sizes fitted")
    click.echo(f"{d['tier']} fabric {name}: bw {f['bw_GBps']:.4g} GB/s x efficiency {f['efficiency']:.3f}, "
               f"latency {f['latency_us']:.2f} us; fit median |error| {d['fit_median_abs_err_pct']:.1f}%")
    click.echo(f"profile: {d['profile']} (cluster preset {name}; use with --profile or CLUSTERSIM_PROFILES)")


def _parse_size(text: str) -> int:
    from clustersim.units import parse_size_bytes
    try:
        return parse_size_bytes(text)
    except ValueError as exc:
        raise InputError("--min-size", text, str(exc)) from None
