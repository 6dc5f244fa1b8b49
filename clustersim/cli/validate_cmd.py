"""`clustersim validate`: run collectives, compute and training steps for real with
torch.distributed, calibrate a profile from a fit set, and report the prediction error on
held-out cases (docs/validation.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import click

from clustersim.errors import InputError, Interrupted


@click.command("validate")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default="gloo", show_default=True,
              help="gloo on CPUs, nccl on GPUs")
@click.option("--nprocs", type=int, default=4, show_default=True, help="ranks (the largest world size)")
@click.option("--netns", is_flag=True, help="each rank in its own network namespace, rate-limited links (root)")
@click.option("--quick", is_flag=True, help="the quick sweep (default)")
@click.option("--full", is_flag=True, help="the full sweep (more sizes, longer windows)")
@click.option("--ci", is_flag=True, help="the tiny sweep CI runs (under a minute)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="directory for records.jsonl, the profile, the plot [validation/measurements/MODE]")
@click.option("--rate-mbit", type=float, default=None, help="--netns: link rate per port [default: 1000]")
@click.option("--delay-us", type=float, default=None, help="--netns: added one-way delay (needs the netem qdisc) "
              "[default: 0]")
@click.option("--fresh", is_flag=True, help="set earlier records aside and measure everything again")
@click.option("--loo", is_flag=True, help="also predict every case by a calibration that did not see it "
              "(leave-one-out; refits the profile once per fit case)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
def validate(backend: str, nprocs: int, netns: bool, quick: bool, full: bool, ci: bool, out_dir: Path | None,
             rate_mbit: float | None, delay_us: float | None, fresh: bool, loo: bool, as_json: bool) -> None:
    """Measure for real, calibrate, predict held-out cases, report the error."""
    chosen = [name for name, on in (("quick", quick), ("full", full), ("ci", ci)) if on]
    if len(chosen) > 1:   # the last one won: --quick --full ran the long sweep
        raise InputError("--quick/--full/--ci", " ".join(f"--{c}" for c in chosen), "one of them: each picks one sweep")
    level = chosen[0] if chosen else "quick"
    if not netns:         # they shape the namespaces' links: without --netns they were dropped silently
        for option, value in (("--rate-mbit", rate_mbit), ("--delay-us", delay_us)):
            if value is not None:
                raise InputError(option, value, "only with --netns (it shapes the links between the namespaces)")
    rate_mbit = 1000.0 if rate_mbit is None else rate_mbit
    delay_us = 0.0 if delay_us is None else delay_us
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from clustersim.calibrate.compare import render_table
    from clustersim.calibrate.launch import RunError, repo_root
    from clustersim.calibrate.store import RECORDS_FILE, read_records
    from clustersim.calibrate.validate import ValidateOptions, check_options, default_out_dir
    from clustersim.calibrate.validate import validate as run_validate

    opts = ValidateOptions(backend=backend, nprocs=nprocs, netns=netns, level=level,
                           out_dir=out_dir or default_out_dir(netns, backend), rate_mbit=rate_mbit,
                           delay_us=delay_us, fresh=fresh)
    # the ranks need torch and the validation/ benchmarks of a source checkout: say so before the
    # options are checked, which creates the output folder
    if importlib.util.find_spec("torch") is None:
        raise InputError("validate", "without torch", "torch, from the validation extra: pip install "
                                                      "'clustersim[validation]' (the CPU build: pip install torch==2.13.0)")
    try:
        repo_root()
    except RunError as exc:
        raise click.ClickException(str(exc)) from None
    # every option before the progress bar and before --out is created (nccl's check imports torch)
    check_options(opts)
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]validate"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=err, transient=as_json) as bar:
        task = bar.add_task("starting ranks", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=name)
        try:
            result = run_validate(opts, progress)
        except RunError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:  # the ranks were stopped on the way out (calibrate.launch)
            records = opts.out_dir / RECORDS_FILE
            kept = len(read_records(records))
            raise Interrupted(f"{kept} measured records kept in {records}; run the same command to resume "
                              "after them") from None
    loo_cases = None
    if loo:
        from clustersim.calibrate.loo import leave_one_out, loo_summary
        loo_cases = leave_one_out(result.records, opts, result.link, result.cases)
    if as_json:
        doc = result.to_json()
        if loo_cases is not None:
            doc["loo"] = {"cases": [c.to_json() for c in loo_cases], "summary": loo_summary(loo_cases)}
        sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        _gate(result, level)
        return
    out = Console(width=max(Console().width, 150))
    out.print(render_table(result.cases, f"predicted vs measured ({opts.mode}, {backend}, {nprocs} ranks)"))
    for role, s in (("held-out", result.holdout), ("fit", result.fit),
                    ("fit points (the cases the constants were fitted to)", result.fit_points)):
        if s["cases"]:
            out.print(f"{role}: {s['cases']} cases, median |error| {s['median_abs_error_pct']:.1f}%, "
                      f"p90 {s['p90_abs_error_pct']:.1f}%")
    if result.fit_check is not None:
        chk = result.fit_check
        parts = ", ".join(f"{k} {v['median_abs_error_pct']:.1f}% ({v['cases']})" for k, v in chk.per_constant.items())
        out.print(f"profile vs its own fit points (median |error| per constant, limit {chk.limit_pct:g}%): {parts}: "
                  + ("ok" if chk.ok else "[red]FAILED[/red]"))
    fab = result.fits["fabric"]
    out.print(f"fitted: GEMM {result.fits['gemm_TFLOPS'] * 1e3:.1f} GFLOP/s per rank, memory copy "
              f"{result.fits['mem_bw_GBps']:.2f} GB/s, fabric {fab['bw_GBps'] * 1e3:.1f} MB/s x efficiency "
              f"{fab['efficiency']:.3f}, latency {fab['latency_us']:.1f} us")
    for op, ab in result.fits["collectives"]["gloo_alpha_beta"].items():
        out.print(f"  {op} alpha-beta (gloo algorithm): alpha {ab['alpha_us']:.1f} us per step, "
                  f"{ab['bw_GBps'] * 1e3:.1f} MB/s")
    for note in result.notes:
        out.print(f"[yellow]note:[/yellow] {note}")
    if loo_cases is not None:
        from rich.table import Table

        from clustersim.calibrate.compare import _fmt_s
        from clustersim.calibrate.loo import loo_summary
        t = Table(title="leave-one-out: each case predicted by a calibration that did not see it")
        for col in ("case", "kind", "role", "measured", "leave-one-out", "error", "how"):
            t.add_column(col, justify="right" if col in ("measured", "leave-one-out", "error") else "left")
        for c in loo_cases:
            t.add_row(c.name, c.kind, c.role, _fmt_s(c.measured_s), _fmt_s(c.loo_s), f"{c.loo_error_pct:+.1f}%", c.how)
        out.print(t)
        for kind, s in loo_summary(loo_cases).items():
            if s["cases"]:
                out.print(f"leave-one-out {kind}: {s['cases']} cases, median |error| {s['median_abs_error_pct']:.1f}%, "
                          f"p90 {s['p90_abs_error_pct']:.1f}%")
    out.print(f"profile: {result.profile_path}\nplot: {result.plot_path}")
    _gate(result, level)


def _gate(result: object, level: str) -> None:
    """--ci: exit 1 when the written profile misses its own fit points (clustersim.calibrate.fit_points)."""
    chk = getattr(result, "fit_check", None)
    if level == "ci" and chk is not None and not chk.ok:
        bad = "; ".join(f"{k}: median |error| {chk.per_constant[k]['median_abs_error_pct']:.1f}% over "
                        f"{chk.per_constant[k]['cases']} fit point(s)" for k in chk.failed)
        raise click.ClickException(f"the fitted profile misses its own fit points by more than {chk.limit_pct:g}% "
                                   f"({bad}); the fit or the profile it wrote is broken")
