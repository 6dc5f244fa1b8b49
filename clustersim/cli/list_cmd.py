"""`clustersim list models|clusters|gpus|fabrics|frameworks`: the presets that ship."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from clustersim.hardware import load


def _rows(kind: str) -> list[dict[str, object]]:
    if kind == "gpus":
        rows = []
        for name in load.list_gpus():
            g = load.load_gpu(name)
            rows.append({"name": name, "bf16_TFLOPS": g.peak("bf16") / 1e12 if "bf16" in g.dtypes else None,
                         "fp8_TFLOPS": g.peak("fp8") / 1e12 if "fp8" in g.dtypes else None,
                         "fp4_TFLOPS": g.peak("fp4") / 1e12 if "fp4" in g.dtypes else None,
                         "hbm_GiB": round(g.hbm_capacity_bytes / 2**30, 1), "hbm_GBps": g.hbm_bw_bytes_per_s / 1e9,
                         "description": g.description})
        return rows
    if kind == "fabrics":
        rows = []
        for name in load.list_fabrics():
            f = load.load_fabric(name)
            rows.append({"name": name, "kind": f.kind, "bw_GBps_per_direction": f.bw_bytes_per_s / 1e9,
                         "efficiency": f.efficiency, "latency_us": round(f.latency_s * 1e6, 3), "nvls": f.nvls,
                         "description": f.description})
        return rows
    if kind == "clusters":
        rows = []
        for name in load.list_clusters():
            c = load.load_cluster(name)
            rows.append({"name": name, "gpu": c.gpu.name, "gpus_per_node": c.gpus_per_node,
                         "scale_up": c.scale_up.name, "scale_out": c.scale_out.name,
                         "nics_per_node": c.nics_per_node, "scale_up_domain": c.gpus_per_domain,
                         "oversubscription": c.oversubscription,
                         "description": c.description})
        return rows
    if kind == "frameworks":
        from dataclasses import asdict

        from clustersim.frameworks import framework_names, load_framework
        return [asdict(load_framework(name)) for name in framework_names()]
    from clustersim.workload.presets import list_model_rows  # models

    return list_model_rows()


@click.command("list")
@click.argument("kind", type=click.Choice(["models", "clusters", "gpus", "fabrics", "frameworks"]))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(kind: str, as_json: bool) -> None:
    """List the presets that ship: models, clusters, gpus, fabrics or frameworks."""
    rows = _rows(kind)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"clustersim {kind}")
    for key in rows[0] if rows else []:
        table.add_column(key)
    for row in rows:
        table.add_row(*("" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in row.values()))
    Console(width=max(Console().width, 160)).print(table)
