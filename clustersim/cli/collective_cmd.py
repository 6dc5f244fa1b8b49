"""`clustersim collective OP --cluster PRESET --gpus N --size BYTES [--algo NAME] [--json]`.

Prints the time, algbw and busbw (nccl-tests definitions, doc/PERFORMANCE.md) of one collective,
or, with ``--sizes START:END[:FACTOR]``, an nccl-tests-like table over sizes growing by FACTOR
(default 2, like ``all_reduce_perf -b START -e END -f 2``).
"""

from __future__ import annotations

import json
import math

import click
from rich.console import Console
from rich.table import Table

from clustersim import units
from clustersim.collectives import OPS, GroupShape, plan_collective
from clustersim.collectives.algorithms import ALGOS_BY_OP
from clustersim.collectives.lowering import simulate_collective
from clustersim.errors import InputError
from clustersim.hardware import load
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import (
    MAX_EVENT_COLLECTIVE_GPUS,
    MAX_GPUS,
    MAX_PER_NODE,
    MAX_SIZE_BYTES,
    MAX_SIZE_ROWS,
    check_at_most,
    check_gpus,
)

ENGINES = ("closed", "event")
_SIZE_ALLOWED = "bytes with an optional suffix: B, K/KiB/KB, M/MiB/MB, G/GiB/GB, T/TiB/TB (e.g. 1GiB, 256MB)"


def parse_size(option: str, text: str) -> int:
    try:
        size = units.parse_size_bytes(text)
    except ValueError:
        raise InputError(option, text, _SIZE_ALLOWED) from None
    if size > MAX_SIZE_BYTES:
        raise InputError(option, text, f"at most {MAX_SIZE_BYTES:,} bytes (1024TiB, clustersim's limit)")
    return size


def parse_sizes(text: str) -> list[int]:
    """``START:END[:FACTOR]`` -> sizes START, START*FACTOR, ... <= END (nccl-tests -b/-e/-f)."""
    parts = text.split(":")
    allowed = "START:END[:FACTOR], e.g. 8B:16GiB or 1MiB:1GiB:4 (0 < START <= END, FACTOR >= 2)"
    if len(parts) not in (2, 3):
        raise InputError("--sizes", text, allowed)
    start, end = parse_size("--sizes", parts[0]), parse_size("--sizes", parts[1])
    try:
        factor = int(parts[2]) if len(parts) == 3 else 2
    except ValueError:
        raise InputError("--sizes", text, allowed) from None
    if start > end or factor < 2 or start < 1:
        raise InputError("--sizes", text, allowed)
    rows = math.floor(math.log(end / start, factor) + 1e-9) + 1 if start else 1
    if rows > MAX_SIZE_ROWS:
        raise InputError("--sizes", text, f"at most {MAX_SIZE_ROWS} sizes (clustersim's limit; this range has {rows})")
    sizes, s = [], start
    while s <= end:
        sizes.append(s)
        s *= factor
    return sizes


def resolve_cluster(preset: str, gpus: int | None, nodes: int | None,
                    gpus_per_node: int | None) -> tuple[ClusterSpec, GroupShape]:
    """Cluster and the all-GPU group for ``--gpus``/``--nodes``; InputError names the option.

    The group's shape counts ranks per scale-up domain (8 on a DGX, up to 72 on an NVL72 rack)
    and domains (clustersim.network.domain)."""
    if preset not in load.list_clusters():
        raise InputError("--cluster", preset, load.list_clusters())
    if gpus_per_node is not None and not 1 <= gpus_per_node <= MAX_PER_NODE:
        raise InputError("--gpus-per-node", gpus_per_node, f"1..{MAX_PER_NODE} (clustersim's limit)")
    if gpus is not None:
        check_gpus("--gpus", gpus)
    if nodes is not None:
        check_at_most("--nodes", nodes, MAX_GPUS, "nodes")
    base = load.load_cluster(preset, 1, gpus_per_node=gpus_per_node)
    gpn = base.gpus_per_node
    if nodes is not None:
        if nodes < 1:
            raise InputError("--nodes", nodes, "a positive integer")
        if gpus is not None and gpus != nodes * gpn:
            raise InputError("--gpus", gpus, f"--nodes x gpus per node = {nodes * gpn} (or leave one out)")
        gpus = nodes * gpn
        if gpus > MAX_GPUS:
            raise InputError("--nodes", nodes, f"at most {MAX_GPUS // gpn:,} nodes of {gpn} GPUs ({MAX_GPUS:,} GPUs, "
                                               "clustersim's limit)")
    if gpus is None:
        gpus = base.scale_up_domain or gpn
    if gpus < 1 or (gpus > gpn and gpus % gpn):
        raise InputError("--gpus", gpus, f"1..{gpn} (one node) or a multiple of {gpn} (gpus per node of {preset})")
    if gpus <= gpn:
        return base, GroupShape(gpus, 1)
    try:
        cluster = load.with_nodes(base, gpus // gpn)
        load.check_domain(cluster)
    except InputError as exc:
        raise InputError("--gpus", gpus, f"{exc.field}: {exc.allowed}") from None
    per_domain = cluster.gpus_per_domain
    return cluster, GroupShape(per_domain, gpus // per_domain)


_SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")   # the buffer is split over the ranks


def _count(op: str, size: int, n: int) -> int:
    """nccl-tests' count column for float32: elements per rank buffer."""
    per = size // 4
    return per // n if op in _SPLIT_OPS else per


def element_unit(op: str, n: int) -> int:
    """Bytes of one float32 element per rank: the buffer is split over the ranks for _SPLIT_OPS."""
    return 4 * (n if op in _SPLIT_OPS else 1)


def whole_elements(op: str, size: int, n: int) -> int:
    """The size in whole float32 elements per rank, as nccl-tests rounds it (its count column):
    3 bytes of all_reduce moved 3 bytes with count 0, and 100 bytes of all_gather on 8 ranks
    12.5 bytes per rank. InputError where not one element is left."""
    unit = element_unit(op, n)
    if size < unit:
        raise InputError("--size", size, f"at least {unit} bytes for {op} on {n} GPUs: one float32 element "
                                          "per rank (nccl-tests' count)")
    return size - size % unit


def result(op: str, size: int, cluster: ClusterSpec, shape: GroupShape, algo: str | None, engine: str) -> dict:
    size = whole_elements(op, size, shape.num_ranks)
    plan = plan_collective(op, float(size), cluster, shape, algo)
    time_s = plan.time_s if engine == "closed" else simulate_collective(op, float(size), cluster, shape, algo)
    algbw = size / time_s if time_s > 0 else 0.0
    busbw = algbw * (plan.busbw_bytes_per_s / plan.algbw_bytes_per_s if plan.algbw_bytes_per_s else 0.0)
    return {
        "op": op, "size_bytes": size, "count": _count(op, size, shape.num_ranks),
        "time_s": time_s, "algbw_GBps": algbw / units.GB, "busbw_GBps": busbw / units.GB,
        "algo": plan.algo, "protocol": plan.protocol, "engine": engine,
        "cluster": cluster.name, "gpus": shape.num_ranks, "nodes": cluster.num_nodes if shape.num_ranks > 1 else 1,
        "scale_up_domains": shape.num_nodes,
        "phases": [{"tier": p.tier, "latency_s": p.latency_s, "wire_bytes": p.wire_bytes,
                    "bw_GBps": p.bw_bytes_per_s / units.GB} for p in plan.phases],
    }


def _table(rows: list[dict], title: str) -> Table:
    table = Table(title=title)
    for col in ("size (B)", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algo", "proto"):
        table.add_column(col, justify="right" if col not in ("algo", "proto") else "left", no_wrap=True)
    for r in rows:
        table.add_row(str(r["size_bytes"]), str(r["count"]), f"{r['time_s'] * 1e6:.2f}", f"{r['algbw_GBps']:.2f}",
                      f"{r['busbw_GBps']:.2f}", r["algo"], r["protocol"])
    return table


@click.command("collective")
@click.argument("op")
@click.option("--cluster", "preset", default="dgx-h100", show_default=True, help="cluster preset (clustersim list clusters)")
@click.option("--gpus", type=int, default=None, help="GPUs in the communicator [default: one scale-up domain]")
@click.option("--nodes", type=int, default=None, help="nodes in the communicator (alternative to --gpus)")
@click.option("--gpus-per-node", type=int, default=None, help="override the preset's GPUs per node")
@click.option("--size", default=None, help="message size: bytes or 1GiB, 256MB ... (nccl-tests convention)")
@click.option("--sizes", default=None, help="sweep START:END[:FACTOR], e.g. 8B:16GiB (factor 2)")
@click.option("--algo", default=None, help="force an algorithm (default: NCCL's choice)")
@click.option("--engine", default="closed", show_default=True, help="closed (closed form) or event (simpy on the topology)")
@click.option("--profile", "profiles", multiple=True, help="extra hardware profile YAML (e.g. calibrated)")
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
def collective(op: str, preset: str, gpus: int | None, nodes: int | None, gpus_per_node: int | None,
               size: str | None, sizes: str | None, algo: str | None, engine: str,
               profiles: tuple[str, ...], as_json: bool) -> None:
    """Time, algbw and busbw of one collective OP (all_reduce, all_gather, ...)."""
    if op not in OPS:
        raise InputError("OP", op, OPS)
    if engine not in ENGINES:
        raise InputError("--engine", engine, ENGINES)
    if algo is not None and algo not in ALGOS_BY_OP[op]:
        raise InputError("--algo", algo, ALGOS_BY_OP[op])
    for path in profiles:
        load.add_profile_file(path)
    cluster, shape = resolve_cluster(preset, gpus, nodes, gpus_per_node)
    if engine == "event" and shape.num_ranks > MAX_EVENT_COLLECTIVE_GPUS:
        raise InputError("--gpus", shape.num_ranks, f"at most {MAX_EVENT_COLLECTIVE_GPUS:,} GPUs with --engine event "
                                                    "(clustersim's limit: it builds the whole topology graph); "
                                                    "--engine closed has no such limit")
    if sizes is not None and size is not None:
        raise InputError("--size", size, f"either --size or --sizes ({sizes}), not both")
    if sizes is not None:
        size_list = parse_sizes(sizes)
    elif size is not None:
        size_list = [parse_size("--size", size)]
    else:
        raise InputError("--size", None, "a size such as 1GiB, or --sizes START:END")
    if sizes is not None:   # as nccl-tests: a range's sizes below one element per rank have no row
        unit = element_unit(op, shape.num_ranks)
        size_list = sorted({whole_elements(op, s, shape.num_ranks) for s in size_list if s >= unit})
        if not size_list:
            raise InputError("--sizes", sizes, f"a range reaching {unit} bytes for {op} on {shape.num_ranks} GPUs: "
                                               "one float32 element per rank (nccl-tests' count)")
    rows = [result(op, s, cluster, shape, algo, engine) for s in size_list]
    if as_json:
        click.echo(json.dumps(rows if sizes is not None else rows[0], sort_keys=True))
        return
    where = (f"{cluster.num_nodes} nodes in {shape.num_nodes} x {cluster.gpus_per_domain}-GPU scale-up domain"
             f"{'s' if shape.num_nodes > 1 else ''}" if cluster.scale_up_domain
             else f"{shape.num_nodes} x {cluster.name}")
    title = f"{op} on {shape.num_ranks} GPUs ({where}, {cluster.name}), {engine} engine"
    if sizes is not None:
        Console(width=max(100, Console().width)).print(_table(rows, title))
        return
    r = rows[0]
    click.echo(f"{title}\n  size {r['size_bytes']} B  algo {r['algo']}/{r['protocol']}  time {r['time_s'] * 1e6:.2f} us"
               f"  algbw {r['algbw_GBps']:.2f} GB/s  busbw {r['busbw_GBps']:.2f} GB/s")
