"""`clustersim run [SCENARIO] [--json] [--trace FILE] [--html FILE] [--set KEY=VALUE ...]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from clustersim import units
from clustersim.api import estimate, simulate_with_timeline
from clustersim.cli.does_not_fit import does_not_fit_lines
from clustersim.errors import InputError, Interrupted
from clustersim.hardware.load import check_profiles_used, use_profiles
from clustersim.html import check_html_path, write_html
from clustersim.html.fragments import MEMORY_ROWS, fmt_energy_kwh, fmt_tokens, sampled_stages
from clustersim.memory.report import PARTS
from clustersim.output_file import check_output_path, write_json_atomic
from clustersim.report import StepReport
from clustersim.scenario import apply_overrides, read_scenario_dict, scenario_from_dict
from clustersim.trace import trace_events
from clustersim.workload.model_summary import model_lines


def _tflops(x: float) -> str:
    """510.1; below 10 with three significant digits (a CPU profile's 0.0457 read "0.0")."""
    return f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def _render(report: StepReport, tokens: float | None = None) -> None:
    sc = report.scenario
    par = sc.parallel
    out = Console(width=100)
    out.print(f"[bold]{sc.name}[/bold]")
    nodes = (" + ".join(f"{g.nodes} x {g.preset}" for g in sc.node_groups) + f" = {report.num_gpus} GPUs"
             if sc.node_groups else
             f"{sc.cluster.num_nodes} x {sc.cluster.name} = {report.num_gpus} {sc.cluster.gpu.name}")
    out.print(f"  model {sc.model.name} ({sc.model.main_params() / 1e9:.1f}B params), {nodes}")
    if sc.model.notes:   # read from an HF config: what was read (clustersim.workload.model_summary)
        for line in model_lines(sc.model):
            out.print(line, highlight=False, markup=False)
    out.print(f"  tp {par.tp}  pp {par.pp}  dp {par.dp}  cp {par.cp}  ep {par.ep}  sp {par.sequence_parallel}  "
              f"zero {par.zero_stage}  micro-batch {par.micro_batch} x {par.num_micro_batches}  "
              f"schedule {par.schedule} (v={par.virtual_stages})  recompute {par.recompute}  {sc.training.dtype}")
    out.print(f"  framework {sc.framework.name} (attention {sc.training.attention}, element-wise "
              f"{'compiled' if sc.training.compile else sc.framework.elementwise})")
    for note in sc.notes:   # fields without effect (clustersim.scenario.loader._scenario_notes)
        out.print(f"  note: {note}", highlight=False, markup=False)
    t = Table(show_header=False, box=None)
    ran = report.memory.fits  # a job that does not fit never runs: no time, rate or energy as if it had
    iv = report.interval
    if ran:
        lo, hi = iv.of(report.step_time_s)
        t.add_row("step time", f"{report.step_time_s:.4f} ({lo:.4f}-{hi:.4f}) s  [{iv.level:.0%} interval; "
                               f"{report.engine} engine]")
        t_lo, t_hi = iv.of_rate(report.tokens_per_s)
        t.add_row("throughput", f"{report.tokens_per_s:,.0f} tokens/s ({t_lo:,.0f}-{t_hi:,.0f})")
        m_lo, m_hi = iv.of_rate(report.mfu)
        t.add_row("TFLOP/s per GPU", f"{_tflops(report.tflops_per_gpu)}  (MFU {report.mfu * 100:.1f}%, "
                                     f"{m_lo * 100:.1f}-{m_hi * 100:.1f}%)")
        evidence = (f"regime {iv.regime}: {iv.evidence_runs} measured runs"
                    + ("; validated" if iv.validated else "; widened: " + "; ".join(iv.why) if iv.why else ""))
        t.add_row("how sure", evidence)
    else:
        t.add_row("step time", "not reported: this layout does not fit in GPU memory, so it cannot run "
                               "(the memory per stage is below)")
    if sc.cluster.calibration is not None:
        from clustersim.uncertainty.calibration_shown import calibration_line
        t.add_row("calibrated", calibration_line(sc))
    if sc.node_groups:
        from clustersim.perrank.hetero import report as mixed

        h = mixed(sc)
        groups = " + ".join(f"{g['nodes']} x {g['preset']}" for g in h["groups"])
        mbs = h["micro_batches_per_replica"]
        runs = " ".join(f"{m}x{n}" if n > 1 else f"{m}" for m, n in _runs(mbs))
        t.add_row("mixed GPUs", f"{groups}; stages on {', '.join(h['stage_gpus'])}")
        how = {"framework": "layers from the framework's split option, micro-batches balanced",
               "layers_per_stage": "layers as given, micro-batches balanced",
               "schedule": f"layers even: the {par.schedule} stage graph puts other stages than chunk * pp + rank "
                           "on a rank; micro-batches balanced"}.get(h["balance"], f"balance {h['balance']}")
        t.add_row("split", f"layers per stage {h['layers_per_stage']}; micro-batches per replica {runs} ({how})")
    elif par.layers_per_stage:   # an explicit or framework split (docs/parallel.md)
        t.add_row("pipeline split", f"layers per stage {list(par.layers_per_stage)}")
    if report.per_rank and ran:
        f = report.per_rank
        who = f["paced_by"]
        paced = ("nothing slower than nominal" if who is None else
                 f"rank {who['rank']} (node {who['node']} GPU {who['gpu']}"
                 + (f" NIC {who['nic']}" if "nic" in who else "")
                 + f"; stage {who['pp']}, replica {who['dp']}): {who['kind']} at {who['speed']:.2f}")
        t.add_row("per-rank", f"{f['classes']} classes of replicas, {f['simulated_ranks']} simulated ranks; "
                              + ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for n, what in (
                                  (f["slow_gpus"], "slow GPU"), (f["stragglers"], "straggler"),
                                  (f["slow_links"], "slow link"))))
        t.add_row("paced by", paced)
        t.add_row("cost", f"{f['cost_s']:+.4f} s ({f['cost_fraction']:+.1%}) against a healthy cluster "
                          f"({f['healthy_step_time_s']:.4f} s)")
    m = report.memory
    lo, hi = (x / units.GiB for x in m.interval)
    t.add_row("peak memory", f"{m.peak_bytes_per_gpu / units.GiB:.1f} GiB ({lo:.1f}-{hi:.1f}) of "
              f"{m.capacity_bytes_per_gpu / units.GiB:.1f} GiB per GPU (stage {m.stage}): {_VERDICT_TEXT[m.verdict]}")
    if (host := report.host_memory) is not None:
        t.add_row("host memory", host_memory_text(host))
    e = report.energy
    if ran:
        t.add_row("power", f"{e.gpu_power_w:,.0f} W per GPU, {e.it_power_w / 1e3:,.1f} kW IT, "
                  f"{e.facility_power_w / 1e3:,.1f} kW facility (PUE {e.pue:g})")
        line = f"{e.energy_per_step_kwh:.3f} kWh per step, {e.energy_per_token_j:.3f} J per token"
        if tokens is not None:
            line += f", {fmt_energy_kwh(e.run_energy_kwh(tokens))} for {fmt_tokens(tokens)} tokens"
        t.add_row("energy", line)
    out.print(t)
    if ran:
        b = Table(title="critical path", show_lines=False)
        b.add_column("cause")
        b.add_column("seconds", justify="right")
        b.add_column("share", justify="right")
        for cause, sec in report.to_json()["breakdown"].items():
            b.add_row(cause, f"{sec:.4f}", f"{sec / report.step_time_s * 100:.1f}%")
        out.print(b)
    out.print(_memory_table(report, out.width))


def host_memory_text(host: dict) -> str:
    """``StepReport.host_memory`` in words: what a node's GPUs offload against its host memory."""
    need = f"{host['bytes_per_node'] / units.GiB:,.1f} GiB per node offloaded ({host['gpus_per_node']} GPUs x " \
           f"{host['bytes_per_gpu'] / units.GiB:,.1f} GiB)"
    bw = ("" if host.get("adam_bw_from_profile", True) else
          f"; host Adam at {host['adam_bw_bytes_per_s_per_node'] / units.GB:,.1f} GB/s per node, a DGX H100's (the "
          "cluster profile gives no host_memory_bw_GBps)")
    if host["verdict"] == "unknown":
        return f"{need}; the cluster profile gives no host_memory_GiB to check it against{bw}"
    verdict = "fits" if host["verdict"] == "fits" else "DOES NOT FIT: the node's host memory does not hold it"
    return f"{need} of {host['capacity_bytes_per_node'] / units.GiB:,.0f} GiB host memory: {verdict}{bw}"


_VERDICT_TEXT = {"fits": "fits", "tight": "TIGHT (the interval straddles the capacity)",
                 "does-not-fit": "DOES NOT FIT"}


def _memory_table(report: StepReport, width: int) -> Table:
    """GiB per GPU by part, one column per pipeline stage; past the columns that fit ``width``, the
    stages are sampled (fragments.sampled_stages: the first, the last, the fullest, a stride)."""
    by_stage = list(report.memory_by_stage)
    most = max(3, (width - 22) // 13)  # the part column, then ~13 characters per stage
    stages = [by_stage[i] for i in sampled_stages(len(by_stage), report.memory.stage, most)]
    title = "memory per GPU (GiB) by pipeline stage"
    if len(stages) < len(by_stage):
        title += f" ({len(stages)} of {len(by_stage)} stages)"
    mt = Table(title=title)
    mt.add_column("part", no_wrap=True)
    for m in stages:
        mt.add_column(f"stage {m.stage}", justify="right", no_wrap=True)
    labels = dict(MEMORY_ROWS)
    for part in PARTS:
        mt.add_row(labels.get(part, part), *(f"{getattr(m, part) / units.GiB:.2f}" for m in stages))
    mt.add_row("allocated peak", *(f"{m.allocated_peak_bytes / units.GiB:.2f}" for m in stages))
    mt.add_row("reserved peak", *(f"{m.reserved_peak_bytes / units.GiB:.2f}" for m in stages))
    mt.add_row("80% interval", *(f"{m.interval[0] / units.GiB:.1f}-{m.interval[1] / units.GiB:.1f}" for m in stages))
    mt.add_row("verdict", *(m.verdict for m in stages))
    return mt


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Run-length encoding: [5, 5, 11] -> [(5, 2), (11, 1)]."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1] = (v, out[-1][1] + 1)
        else:
            out.append((v, 1))
    return out


@click.command("run")
@click.argument("scenarios", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), help="Write a Chrome/Perfetto trace.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field: parallel.tp=4.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML report (timeline, breakdown, memory, scenario).")
@click.option("--engine", type=click.Choice(["event", "analytical"]), default="event", show_default=True,
              help="event: simpy with link contention; analytical: the closed-form twin.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (e.g. one written by `clustersim validate`).")
@click.option("--tokens", default=None, help="Training tokens (1T, 300B): adds the energy of the whole run.")
@click.option("--shared-fabric", is_flag=True,
              help="Several SCENARIOS as jobs on one fabric: their steps together, sharing the spine.")
@click.option("--steps", type=int, default=None, help="With --shared-fabric: steps per job [default: 3].")
def run(scenarios: tuple[str, ...], as_json: bool, trace_file: str | None, overrides: tuple[str, ...],
        html_file: str | None, engine: str, profiles: tuple[str, ...], tokens: str | None, shared_fabric: bool,
        steps: int | None) -> None:
    """Simulate one training step of SCENARIO (an embedded default when omitted); with
    --shared-fabric, the steps of several SCENARIOS sharing one fabric."""
    from clustersim.sweep.compare import parse_tokens

    n_tokens = parse_tokens(tokens) if tokens is not None else None
    inputs = (*scenarios, *profiles)
    if html_file is not None:
        check_html_path(html_file, inputs=inputs)
    if trace_file is not None:
        check_output_path(trace_file, "--trace", inputs=inputs)
        if html_file is not None and Path(trace_file).resolve() == Path(html_file).resolve():
            # the page was written over the trace (or the other way round), exit 0
            raise InputError("--trace", trace_file, "a file other than --html's (both would be written to it)")
    use_profiles(profiles)
    if shared_fabric or len(scenarios) > 1:
        if tokens is not None:   # the shared-fabric report has no energy: --tokens was ignored
            raise InputError("--tokens", tokens, "one scenario (not with --shared-fabric)")
        _run_shared(scenarios, overrides, as_json, 3 if steps is None else steps, shared_fabric,
                    ("--trace", trace_file) if trace_file else ("--html", html_file) if html_file else None, engine)
        return
    if steps is not None:        # one step is simulated: --steps was ignored
        raise InputError("--steps", steps, "only with --shared-fabric (several jobs' steps on one fabric)")
    scenario = scenarios[0] if scenarios else None
    raw = apply_overrides(read_scenario_dict(scenario), list(overrides))
    sc = scenario_from_dict(raw)
    if not sc.node_groups:
        check_profiles_used(profiles, sc.cluster)
    if engine == "analytical" and trace_file is not None:
        raise InputError("--trace", trace_file, "only with --engine event")
    written: list[str] = []
    try:
        report = _run_one(sc, raw, engine, trace_file, html_file, n_tokens, written)
        if as_json:
            click.echo(json.dumps(report.to_json(n_tokens), indent=2))
        else:
            _render(report, n_tokens)
    except KeyboardInterrupt:   # Ctrl-C: one line says which files are whole and which were not written
        missing = [f for f in (trace_file, html_file) if f and f not in written]
        raise Interrupted("run stopped" + (f"; {' and '.join(missing)} not written" if missing else "")
                          + (f"; {' and '.join(written)} written in full" if written else "")) from None
    host = report.host_memory
    if host is not None and host["verdict"] == "does-not-fit":   # a warning beside the GPU verdict (docs/output.md)
        click.echo(f"warning: host memory: {host_memory_text(host)}", err=True)
    if not report.memory.fits:
        for line in does_not_fit_lines(report.memory, report.num_gpus, scenario, overrides, profiles,
                                       job=report.scenario):
            click.echo(line, err=True)
        sys.exit(3)


def _run_one(sc, raw: dict, engine: str, trace_file: str | None, html_file: str | None, n_tokens: float | None,
             written: list[str]):
    """One scenario's report, its trace and page written (each whole or not at all); ``written``
    collects the files as they are done."""
    timeline = None
    if engine == "analytical":
        report = estimate(sc)
    else:
        report, result = simulate_with_timeline(sc, record=bool(trace_file or html_file))
        timeline = result.timeline
        if trace_file is not None:
            write_json_atomic(trace_file, trace_events(result.timeline, sc, report.per_rank))
            written.append(trace_file)
    if html_file is not None:
        from clustersim.html.run_page import run_page

        write_html(html_file, run_page(report, timeline, raw, n_tokens))
        written.append(html_file)
    return report


def _run_shared(paths: tuple[str, ...], overrides: tuple[str, ...], as_json: bool, steps: int, shared: bool,
                extra: tuple[str, str] | None, engine: str) -> None:
    """`run A.yaml B.yaml --shared-fabric`: clustersim.engine.cosim."""
    from clustersim.engine.cosim import cosimulate

    if not shared:
        raise InputError("SCENARIO", list(paths), "one scenario, or several with --shared-fabric")
    if extra:   # (the option given, its file): the message names the one the user gave
        raise InputError(extra[0], extra[1], "one scenario (not with --shared-fabric)")
    if engine != "event":
        raise InputError("--engine", engine, "event with --shared-fabric (the jobs meet on shared links)")
    scenarios = [scenario_from_dict(apply_overrides(read_scenario_dict(p), list(overrides))) for p in paths]
    for path, sc in zip(paths, scenarios, strict=True):   # a job that cannot start shares no fabric: exit 3 as run
        memory = estimate(sc).memory
        if not memory.fits:
            lines = does_not_fit_lines(memory, sc.cluster.num_gpus, path, overrides, job=sc)
            click.echo(f"{lines[0]} ({path}: {sc.name})", err=True)
            click.echo(lines[1], err=True)
            sys.exit(3)
    out = cosimulate(scenarios, steps)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    f = out["shared_fabric"]
    console = Console(width=100)
    console.print(f"[bold]{len(f['jobs'])} jobs on one fabric[/bold]: {f['nodes']} nodes, {f['nodes_per_leaf']} per "
                  f"leaf, oversubscription {f['oversubscription']:g}:1, {f['steps']} step{'' if f['steps'] == 1 else 's'} each")
    t = Table()
    for col in ("job", "nodes", "per leaf", "alone s", "shared s", "slowdown"):
        t.add_column(col, justify="right")
    for j in f["jobs"]:
        t.add_row(j["name"], str(j["nodes"]), str(j["nodes_per_leaf"]), f"{j['alone_step_time_s']:.4f}",
                  f"{j['step_time_s']:.4f}", f"{j['slowdown']:.3f}x")
    console.print(t)
