"""`clustersim import KIND FILE`: a training framework's config or log -> a scenario (docs/calibration.md).

KIND is megatron-log, megatron-args, torchtitan-log, torchtitan-toml, deepspeed-log or
deepspeed-json. With ``--json`` it prints one JSON object: ``scenario`` (the scenario as a dict),
and for logs ``measured_step_time_s`` (median of the steady-state iterations) and
``iterations`` (docs/output.md); ``--out`` writes the scenario as YAML.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
import yaml

from clustersim.importers import KINDS
from clustersim.limits import MAX_GPUS


def _beside(scenario: dict, out: str) -> dict:
    """The scenario as written to ``out``: a ``model.hf_config`` given as a path relative to where
    `import` ran is made relative to ``out``'s folder, where the loader looks first (docs/scenario.md),
    so the written file loads from anywhere; a repository id (Org/Name in the local cache) stays."""
    model = scenario.get("model")
    hf = model.get("hf_config") if isinstance(model, dict) else None
    if not isinstance(hf, str) or os.path.isabs(hf) or not os.path.exists(hf):
        return scenario
    target = os.path.relpath(os.path.abspath(hf), os.path.dirname(os.path.abspath(out)))
    return {**scenario, "model": {**model, "hf_config": target}}


@click.command("import")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("file", type=str)
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="the job config beside a torchtitan or DeepSpeed log (TOML / JSON), or beside a Megatron-LM "
                   "log without its arguments block (command line, arguments, or a clustersim scenario)")
@click.option("--cluster", default=None, help="cluster preset the job ran on (logs rarely name the GPU)")
@click.option("--nodes", type=click.IntRange(min=1, max=MAX_GPUS), default=None, help="nodes the job ran on, where the file does not say")
@click.option("--model", default=None, help="model preset (clustersim list models), where the file does not say")
@click.option("--hf-config", "hf_config", default=None, help="a Hugging Face config.json for the model")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a scenario field")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="write the scenario (YAML)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
def import_(kind: str, file: str, config: str | None, cluster: str | None, nodes: int | None, model: str | None,
            hf_config: str | None, overrides: tuple[str, ...], out: str | None, as_json: bool) -> None:
    """Turn a framework's config or training log into a clustersim scenario."""
    from clustersim.importers import finish, given_model, given_parallel, import_text, read_input
    from clustersim.output_file import check_output_path, write_text_atomic
    if out is not None:
        check_output_path(out, "--out", inputs=[p for p in (file, config, hf_config) if p is not None])
    text, name = read_input(file, "FILE", f"a {kind} file")
    cfg = read_input(config, "--config", "a job config") if config else None
    result = finish(import_text(kind, text, name, config=cfg, cluster=cluster, nodes=nodes,
                                model=given_model(overrides, model, hf_config), parallel=given_parallel(overrides)),
                    list(overrides), model, hf_config)
    if cluster is not None:   # a log that names its GPU, against --cluster: calibrate's rule
        from clustersim.calibrate.devices import check_devices
        from clustersim.hardware.load import load_cluster
        from clustersim.importers.common import gpu_line_in
        device = gpu_line_in(text)
        if device:
            check_devices(load_cluster(cluster, 1), [(name, device)], "FILE")
    if result.unknown:
        click.echo(f"note: {len(result.unknown)} argument(s) clustersim does not know, ignored: "
                   + ", ".join(result.unknown), err=True)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if out is not None:
        header = f"# {result.scenario.get('name', 'imported')}: written by clustersim import {kind} {name}\n"
        write_text_atomic(out, header + yaml.safe_dump(_beside(result.scenario, out), sort_keys=False))
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=1) + "\n")
        return
    # what is not the scenario is a YAML comment, so that `clustersim import ... > job.yaml` loads
    click.echo(f"# {kind} {name}: framework {result.framework}")
    if result.measured_step_time_s is not None:
        steady = [i for i in result.iterations if not i.dropped]
        click.echo(f"# measured step time {result.measured_step_time_s:.4f} s (median of {len(steady)} steady-state "
                   f"lines of {len(result.iterations)}; warm-up and outliers dropped)")
    click.echo(yaml.safe_dump(result.scenario, sort_keys=False).rstrip())
    if out is not None:
        click.echo(f"# scenario written to {Path(out)}")
