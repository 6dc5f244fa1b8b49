"""`clustersim list models|clusters|gpus|fabrics|frameworks`: the presets that ship.

``--json`` prints every field of every preset (a hardware preset: the table's values and every
other key of its profile entry, _with_profile). The table shows the fields one needs to pick a
preset, under short headers, fitted to the terminal: the description takes the width that is
left and wraps; on a terminal too narrow for every column, the description goes first and then
the columns at the end of each kind's priority order, and a note names what was left out (the
names are never cut short).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import click
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from clustersim.hardware import load

MIN_DESCRIPTION_CHARS = 24  # narrower, a description wraps into a column of stubs: leave it to --json


def _with_profile(section: str, name: str, row: dict[str, object]) -> dict[str, object]:
    """A hardware preset's row and then every other key of its profile entry, under the profile's
    own name and unit (``--json``: every field; pcie, host_memory_GiB, l2_MiB, ... had no column)."""
    return {"name": name, **row, **{k: v for k, v in load.describe(section, name).items() if k not in row}}


def _rows(kind: str) -> list[dict[str, object]]:
    if kind == "gpus":
        rows = []
        for name in load.list_gpus():
            g = load.load_gpu(name)
            rows.append(_with_profile("gpus", name, {"bf16_TFLOPS": g.peak("bf16") / 1e12 if "bf16" in g.dtypes else None,
                         "fp8_TFLOPS": g.peak("fp8") / 1e12 if "fp8" in g.dtypes else None,
                         "fp4_TFLOPS": g.peak("fp4") / 1e12 if "fp4" in g.dtypes else None,
                         "hbm_GiB": round(g.hbm_capacity_bytes / 2**30, 1), "hbm_GBps": g.hbm_bw_bytes_per_s / 1e9,
                         # every dense peak the profile holds (a validate profile has fp32 alone), and
                         # what the table leaves out
                         "peak_TFLOPS": {dtype: value / 1e12 for dtype, value in g.peak_flops_per_s},
                         # null where the profile gives none (no price; GEMM efficiency from the shape model)
                         "num_sms": g.num_sms, "tdp_w": g.tdp_w,
                         "price_per_gpu_hour_usd": g.price_per_gpu_hour_usd or None,
                         "gemm_efficiency": g.gemm_efficiency or None, "description": g.description}))
        return rows
    if kind == "fabrics":
        rows = []
        for name in load.list_fabrics():
            f = load.load_fabric(name)
            rows.append(_with_profile("fabrics", name, {"kind": f.kind, "bw_GBps_per_direction": f.bw_bytes_per_s / 1e9,
                         "efficiency": f.efficiency, "latency_us": round(f.latency_s * 1e6, 3), "nvls": f.nvls,
                         "description": f.description}))
        return rows
    if kind == "clusters":
        rows = []
        for name in load.list_clusters():
            c = load.load_cluster(name)
            # the preset's domain, not the one-node cluster's (gpus_per_domain caps it at the job's GPUs)
            rows.append(_with_profile("clusters", name, {"gpu": c.gpu.name, "gpus_per_node": c.gpus_per_node,
                         "scale_up": c.scale_up.name, "scale_out": c.scale_out.name,
                         "nics_per_node": c.nics_per_node, "scale_up_domain": c.scale_up_domain or c.gpus_per_node,
                         "oversubscription": c.oversubscription,
                         "description": c.description}))
        return rows
    if kind == "frameworks":
        from dataclasses import asdict

        from clustersim.frameworks import framework_names, load_framework
        return [asdict(load_framework(name)) for name in framework_names()]
    from clustersim.workload.presets import list_model_rows  # models

    return list_model_rows()


@dataclass(frozen=True)
class Column:
    """One column of a `list` table: the row's key (or a function of the row), its header."""

    key: str
    header: str
    value: Callable[[dict[str, object]], object] | None = None

    def cell(self, row: dict[str, object]) -> str:
        v = self.value(row) if self.value else row.get(self.key)
        if v is None:
            return ""
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)


def _billions(key: str) -> Callable[[dict[str, object]], str]:
    """A parameter count in billions to two decimals, so that the column lines up (352.80, not 352.8)."""
    return lambda row: f"{row[key]:.2f}"


def _bytes_wgo(row: dict[str, object]) -> str:
    return f"{row['param_bytes']}/{row['grad_bytes']}/{row['optimizer_bytes']}"


def _overlap(row: dict[str, object]) -> str:
    return "/".join("yes" if row[k] else "no" for k in ("overlap_grad_reduce", "overlap_param_gather"))


# Each kind's columns in priority order: on a narrow terminal the last ones go first. "description"
# is always last in priority and shown last.
COLUMNS: dict[str, tuple[Column, ...]] = {
    "models": (Column("name", "name"), Column("params_B", "params B", _billions("params_B")), Column("layers", "layers"),
               Column("hidden", "hidden"), Column("heads", "heads"), Column("kv_heads", "kv heads"),
               Column("experts", "experts"), Column("active_params_B", "active B", _billions("active_params_B")),
               Column("seq_len", "seq len"),
               Column("ffn_hidden", "ffn hidden"), Column("ffn_act", "ffn act"), Column("vocab", "vocab")),
    "clusters": (Column("name", "name"), Column("gpu", "GPU"), Column("gpus_per_node", "GPUs per node"),
                 Column("scale_up_domain", "scale-up domain"), Column("scale_up", "scale-up fabric"),
                 Column("scale_out", "scale-out fabric"), Column("nics_per_node", "NICs per node"),
                 Column("oversubscription", "over-subscr."), Column("description", "description")),
    "gpus": (Column("name", "name"), Column("bf16_TFLOPS", "bf16 TFLOPS"), Column("hbm_GiB", "HBM GiB"),
             Column("hbm_GBps", "HBM GB/s"), Column("fp8_TFLOPS", "fp8 TFLOPS"), Column("fp4_TFLOPS", "fp4 TFLOPS"),
             Column("description", "description")),
    "fabrics": (Column("name", "name"), Column("kind", "kind"), Column("bw_GBps_per_direction", "GB/s per direction"),
                Column("latency_us", "latency us"), Column("efficiency", "efficiency"), Column("nvls", "NVLS"),
                Column("description", "description")),
    "frameworks": (Column("name", "name"), Column("attention", "attention"), Column("zero3", "ZeRO-3 as"),
                   Column("bytes", "bytes per param w/g/opt", _bytes_wgo),
                   Column("grad_reduce_dtype", "grad reduce"), Column("elementwise", "element-wise"),
                   Column("overlap", "overlap grad/param", _overlap), Column("description", "description")),
}


TEXT_KEYS = {"name", "gpu", "scale_up", "scale_out", "kind", "attention", "zero3", "grad_reduce_dtype",
             "elementwise", "ffn_act", "bytes", "overlap", "description"}


def _width(col: Column, rows: list[dict[str, object]], compact: bool) -> int:
    """A column's width: its widest cell, or its header (its longest word when ``compact``:
    headers then wrap at spaces)."""
    head = max(len(w) for w in col.header.split()) if compact else len(col.header)
    return max([head] + [len(col.cell(r)) for r in rows])


def _table(kind: str, columns: list[Column], rows: list[dict[str, object]], compact: bool) -> Table:
    table = Table(title=f"clustersim {kind}", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  title_justify="left")
    for col in columns:
        if col.key == "description":  # takes what is left and wraps
            table.add_column(col.header, min_width=MIN_DESCRIPTION_CHARS)
        else:
            table.add_column(col.header, justify="left" if col.key in TEXT_KEYS else "right",
                             width=_width(col, rows, compact))
    for row in rows:
        table.add_row(*(col.cell(row) for col in columns))
    return table


def fitted_table(kind: str, rows: list[dict[str, object]], width: int, console: Console) -> tuple[Table, list[str]]:
    """The table of ``kind`` at most ``width`` characters wide, and the headers left out to fit:
    whole headers if they fit, else headers wrapped at spaces, else fewer columns."""
    spec = list(COLUMNS[kind])
    for compact in (False, True):
        shown = [c for c in spec if c.key != "description"]
        left_out = [c.header for c in spec if c.key == "description"]

        def needs(columns: list[Column], compact: bool = compact) -> int:
            table = _table(kind, columns, rows, compact)
            return Measurement.get(console, console.options.update(width=10_000), table).minimum

        if needs(spec) <= width:
            return _table(kind, spec, rows, compact), []
    while len(shown) > 1 and needs(shown) > width:
        left_out.insert(0, shown.pop().header)
    return _table(kind, shown, rows, True), left_out


@click.command("list")
@click.argument("kind", type=click.Choice(["models", "clusters", "gpus", "fabrics", "frameworks"]))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table (every field).")
def list_(kind: str, as_json: bool) -> None:
    """List the presets that ship: models, clusters, gpus, fabrics or frameworks."""
    rows = _rows(kind)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))  # a YAML date (calibration) as written
        return
    console = Console()
    table, left_out = fitted_table(kind, rows, console.width, console)
    console.print(table)
    if left_out:
        console.print(f"(left out at {console.width} columns: {', '.join(left_out)}; "
                      f"all fields: clustersim list {kind} --json)")
