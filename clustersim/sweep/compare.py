"""`clustersim compare`: the best layout per cluster and size, time to train, cost and energy.

Arithmetic (per cluster and size, with the best layout's simulated throughput):
    time_to_train_s = tokens / tokens_per_s
    gpu_hours       = gpus * time_to_train_s / 3600
    gpu_cost_usd    = gpu_hours * price_per_gpu_hour_usd
    energy_kwh      = facility power * time_to_train_s / 3.6e6      (clustersim.energy)
    energy_cost_usd = energy_kwh * price_per_kwh_usd
    cost_usd        = gpu_cost_usd + energy_cost_usd
The GPU-hour price comes from the GPU profile (``price_per_gpu_hour_usd``, with its source and
date in hardware_profiles/gpus.yaml) unless ``--price-per-gpu-hour`` overrides it; electricity
from ``--price-per-kwh`` (default clustersim.energy.DEFAULT_USD_PER_KWH; 0 for cloud prices that
include power). Every row carries an 80% interval derived in one place (``run_interval``) from
the best layout's step-time interval (clustersim.uncertainty.step_interval, which widens for GPUs
without measured runs or without a public GEMM measurement, clustersim.compute.arch.gemm_measured):
time, cost and energy all scale with the step time at fixed power.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from clustersim.compute.precision import default_recipe, resolve_recipe
from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_COMPARE_SWEEPS, MAX_GPUS, check_at_most, check_gpus
from clustersim.scenario import Scenario

SECONDS_PER_HOUR = 3600.0
TOKEN_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_TOKENS_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]?)\s*$")
MIN_TOKENS = 1e3   # a training run of fewer tokens than this is a typo (0.5 was read as half a token)
_TOKENS_ALLOWED = ("a token count of at least 1K: a number with an optional suffix K (1e3), M, B or T (1e12), "
                   "e.g. 1T or 300B")


def parse_tokens(text: str | float | int) -> float:
    """``"1T"`` -> 1e12, ``"300B"`` -> 3e11, ``"2.5M"`` -> 2.5e6, ``"1e9"`` -> 1e9 tokens."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _TOKENS_RE.match(str(text))
        if not m or m.group(2).upper() not in TOKEN_SUFFIX:
            raise InputError("--tokens", text, _TOKENS_ALLOWED)
        value = float(m.group(1)) * TOKEN_SUFFIX[m.group(2).upper()]
    if not math.isfinite(value) or value < MIN_TOKENS:
        raise InputError("--tokens", text, _TOKENS_ALLOWED)
    return value


def _price(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError("--price-per-gpu-hour", where, "a price in USD per GPU-hour: one number (2.5) or "
                                                        "PRESET=PRICE pairs (dgx-a100=1.8,dgx-h100=3)")
    return value


def parse_prices(text: str | None, clusters: list[str]) -> dict[str, float]:
    """``--price-per-gpu-hour``: one number for every cluster, or ``preset=price,...``.

    Returns the overridden prices by cluster preset (an empty dict when ``text`` is None).
    """
    if text is None or not str(text).strip():
        return {}
    text = str(text).strip()
    if "=" not in text:
        price = _price(text, text)
        return {c: price for c in clusters}
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError("--price-per-gpu-hour", item, "PRESET=PRICE pairs separated by commas")
        if name not in clusters:
            raise InputError("--price-per-gpu-hour", item, f"a preset given in --clusters: {', '.join(clusters)}")
        if name in out:
            raise InputError("--price-per-gpu-hour", item, f"one price per preset ({name} is priced twice)")
        out[name] = _price(value.strip(), item)
    return out


def parse_price_per_kwh(text: str | float | None) -> float:
    """``--price-per-kwh``: USD per kWh of facility energy (>= 0)."""
    from clustersim.energy import DEFAULT_USD_PER_KWH

    if text is None:
        return DEFAULT_USD_PER_KWH
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError("--price-per-kwh", text, "a price in USD per kWh >= 0, e.g. 0.08 (0: included in the GPU price)")
    return value


@dataclass(frozen=True, slots=True)
class TrainCost:
    time_to_train_s: float
    gpu_hours: float
    cost_usd: float


def train_cost(tokens: float, tokens_per_s: float, gpus: int, price_per_gpu_hour_usd: float) -> TrainCost:
    """Time, GPU-hours and cost of training on ``tokens`` at a steady ``tokens_per_s``."""
    if tokens_per_s <= 0:
        raise ValueError(f"tokens_per_s must be > 0, got {tokens_per_s}")
    time_s = tokens / tokens_per_s
    gpu_hours = gpus * time_s / SECONDS_PER_HOUR
    return TrainCost(time_s, gpu_hours, gpu_hours * price_per_gpu_hour_usd)


def parse_list(text: str, option: str, kind: type = str) -> list:
    """``--clusters``/``--nodes``/``--gpus``: comma-separated items, each once. Repeats are found
    on the values (``16,016`` is 16 twice), not on the text."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise InputError(option, text, "a comma-separated list")
    values: list = items
    if kind is int:
        try:
            values = [int(t) for t in items]
        except ValueError:
            raise InputError(option, text, "comma-separated positive integers, e.g. 16,32,64") from None
        if any(v < 1 for v in values):
            raise InputError(option, text, "comma-separated positive integers, e.g. 16,32,64")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:   # a repeated cluster or size gave the same row twice
        raise InputError(option, text, f"each item once ({', '.join(map(str, repeated))} repeated)")
    return values


def stated_recipe(raw: dict[str, object]) -> str | None:
    """The low-precision recipe a scenario file states (``training.fp8_recipe`` / ``fp4_recipe``)."""
    training = raw.get("training")
    if not isinstance(training, dict):
        return None
    recipe = training.get("fp8_recipe") or training.get("fp4_recipe")
    return None if recipe is None else str(recipe)


def scenario_on(scenario: Scenario, cluster: ClusterSpec, stated: str | None = None) -> Scenario:
    """The same job on another cluster; the dtype (and its low-precision recipe) must exist on its GPU.
    ``stated``: the recipe the scenario file names (``stated_recipe``), which travels with the job
    even where it is its own GPU's default (an mxfp8 job is no delayed-scaling job on an H100)."""
    if scenario.training.dtype not in cluster.gpu.dtypes:
        raise InputError("training.dtype", scenario.training.dtype,
                         f"a dtype that {cluster.gpu.name} ({cluster.name}) has: {', '.join(cluster.gpu.dtypes)}")
    t = scenario.training
    recipe = ""
    if t.dtype in ("fp8", "fp4"):
        # the GPU's default recipe follows the GPU; an explicit one travels with the job and must run there
        explicit = stated or (t.recipe if t.recipe and t.recipe != default_recipe(t.dtype, scenario.cluster.gpu)
                              else None)
        recipe = resolve_recipe(t.dtype, explicit if t.dtype == "fp8" else None,
                                explicit if t.dtype == "fp4" else None, cluster.gpu)
    return replace(scenario, cluster=cluster, training=replace(t, recipe=recipe))


@dataclass(frozen=True, slots=True)
class ClusterSize:
    """How one cluster preset holds a requested size: its node count, the GPUs of each scale-up
    domain when the job uses only part of each (0: the preset's domain), and a note for the table
    when the job is not exactly the requested GPUs in whole domains ("" otherwise)."""

    nodes: int
    scale_up_domain: int = 0
    note: str = ""
    gpus_per_node: int = 0   # 0: the preset's; else part of one node (``part_of_node``)


def part_of_node(cluster: ClusterSpec, gpus: int) -> ClusterSpec:
    """``gpus`` GPUs of one node of ``cluster`` (a divisor of its GPUs per node), its NICs in
    proportion (at least one): the size `sweep --gpus` and `compare --gpus` give a count below a node."""
    return replace(cluster, num_nodes=1, gpus_per_node=gpus,
                   nics_per_node=max(1, cluster.nics_per_node * gpus // cluster.gpus_per_node))


def holds_part_of_node(gpus: int, gpus_per_node: int) -> bool:
    """Whether ``gpus`` runs on part of one node (``part_of_node``): fewer than a node, dividing it."""
    return gpus < gpus_per_node and gpus_per_node % gpus == 0


def domain_split(gpus: int, gpus_per_node: int, domain: int) -> int:
    """GPUs per scale-up domain for a job of ``gpus``: all of them up to one domain, else the most
    GPUs, in whole nodes and at most ``domain``, that split ``gpus`` into equal parts (``gpus_per_node``
    always does)."""
    if gpus <= domain:
        return gpus
    return max(d for d in range(gpus_per_node, domain + 1, gpus_per_node) if gpus % d == 0)


def splits_well(gpus: int, gpus_per_node: int, domain: int) -> bool:
    """``gpus`` fit in one domain or split into equal parts of at least half a domain each."""
    return 2 * domain_split(gpus, gpus_per_node, domain) >= domain or gpus <= domain


def distinct_sizes(preset: str, gpus: list[int], settings: dict[str, object] | None = None
                   ) -> list[tuple[ClusterSize, int]]:
    """(size, the GPU count asked for) of each of ``gpus`` on ``preset`` (``cluster_size``), once per
    size: counts that round to the same size (76 and 80 GPUs of NVL72 racks, both 80) give one row, the
    exact count's (else the first's), whose note names the counts it stands for."""
    gpn = load_cluster(preset, 1, **(settings or {})).gpus_per_node
    out: list[tuple[ClusterSize, int]] = []
    for g in gpus:
        size = cluster_size(preset, g, settings=settings)
        same = next((i for i, (s, _) in enumerate(out) if replace(s, note="") == replace(size, note="")), None)
        if same is None:
            out.append((size, g))
            continue
        total = size.nodes * (size.gpus_per_node or gpn)
        kept, asked = out[same]
        first = asked
        if g == total:   # the exact count's row stays, with its own note
            kept, asked = size, g
        note = f"--gpus {first} and {g} run as the same {total} GPUs of {preset}: one row"
        out[same] = (replace(kept, note="; ".join(t for t in (kept.note, note) if t)), asked)
    return out


def cluster_size(preset: str, gpus: int | None = None, nodes: int | None = None,
                 settings: dict[str, object] | None = None) -> ClusterSize:
    """The size of ``preset`` for ``gpus`` GPUs (``--gpus``, or the scenario's count) or ``nodes``
    nodes (``--nodes``): the same GPU count on every cluster, so that the rows compare like with like.

    A job larger than one scale-up domain holds whole domains (clustersim.hardware.load.check_domain).
    Where the GPUs are no multiple of the preset's domain (512 on 72-GPU NVL72 racks), the job uses
    the same part of each domain: 8 racks of 64 GPUs, NVLink among the 64 of a rack, the same 512
    GPUs as on every other cluster. The part must be whole nodes and at least half the domain (a
    rack whose NVLink reaches fewer GPUs than that is no longer what one buys it for); otherwise
    ``--gpus`` rounds up to the next GPU count that splits so (76 -> 80: 2 x 40) and ``--nodes`` is
    refused, naming the counts that work.
    A count below a node that divides it runs on part of one node (``part_of_node``, as `sweep
    --gpus` does); other GPU counts that are no multiple of the node round up to whole nodes. Each departure from the
    requested count or domain is in ``note``. ``settings``: the scenario's cluster keys kept on this
    preset (``compare_cluster``)."""
    if nodes is not None:
        check_at_most("--nodes", nodes, MAX_GPUS, "nodes")
    else:
        check_gpus("--gpus", int(gpus or 0))
    base = load_cluster(preset, 1, **(settings or {}))
    gpn, domain = base.gpus_per_node, base.scale_up_domain
    if nodes is None and holds_part_of_node(int(gpus or 0), gpn):   # as `sweep --gpus` runs it
        return ClusterSize(1, 0, "", int(gpus or 0))
    n = nodes if nodes is not None else -(-int(gpus or 0) // gpn)
    total = n * gpn
    notes = [] if nodes is not None or total == gpus else [f"{total} GPUs, not {gpus}: whole nodes of {gpn}"]
    if not domain or domain <= gpn or total <= domain or total % domain == 0:
        return ClusterSize(n, 0, "; ".join(notes))
    if not splits_well(total, gpn, domain):
        if nodes is not None:
            raise InputError("--nodes", nodes, f"for {preset} ({gpn} GPUs per node, {domain}-GPU scale-up domains): "
                                               f"{_node_counts(gpn, domain, nodes)}")
        total = next(t for t in range(total, total + domain + 1, gpn) if splits_well(t, gpn, domain))
        notes = [f"{total} GPUs, not {gpus}: the next count in whole nodes of {gpn} that splits into equal parts "
                 f"of at least {domain // 2} per {domain}-GPU scale-up domain"]
        n = total // gpn
        if total % domain == 0:
            return ClusterSize(n, 0, "; ".join(notes))
    part = domain_split(total, gpn, domain)
    notes.append(f"as {total // part} x {part} GPUs: {part} of each {domain}-GPU scale-up domain ({total} is no "
                 f"multiple of {domain})")
    return ClusterSize(n, part, "; ".join(notes))


def nearest_split(gpus: int, gpus_per_node: int, domain: int) -> str:
    """The GPU counts nearest ``gpus`` in whole nodes that ``splits_well`` accepts, in words."""
    below = next((g for g in range(gpus - gpus_per_node, 0, -gpus_per_node) if splits_well(g, gpus_per_node, domain)),
                 None)
    above = next(g for g in range(gpus + gpus_per_node, gpus + domain + gpus_per_node + 1, gpus_per_node)
                 if splits_well(g, gpus_per_node, domain))
    return " or ".join(str(g) for g in (below, above) if g is not None)


def _node_counts(gpus_per_node: int, domain: int, near: int) -> str:
    """The node counts that ``cluster_size`` accepts near ``near``, in words."""
    per = domain // gpus_per_node

    def ok(n: int) -> bool:
        return splits_well(n * gpus_per_node, gpus_per_node, domain)

    below = next((n for n in range(near - 1, 0, -1) if ok(n)), None)
    above = next(n for n in range(near + 1, near + per + 1) if ok(n))
    nearest = " or ".join(str(n) for n in (below, above) if n is not None)
    return (f"1 to {per} nodes (part of one domain), or a node count whose GPUs split into equal parts of "
            f"{domain // 2} to {domain} GPUs per domain; nearest: {nearest}")


def own_cluster_settings(raw: dict[str, object]) -> tuple[str | None, dict[str, object]]:
    """The scenario's cluster preset and the keys it sets on it (``scale_out``, ``nics_per_node``,
    ``pue``, ``gpu``, ...: everything but ``preset`` and ``nodes``). `compare` keeps them on that
    preset, which is then the user's cluster at another size; other presets are as shipped."""
    from clustersim.scenario.loader import DEFAULT_CLUSTER_PRESET

    section = raw.get("cluster")
    if not isinstance(section, dict) or section.get("groups") is not None:
        return None, {}
    preset = section.get("preset") or DEFAULT_CLUSTER_PRESET
    return str(preset), {k: v for k, v in section.items() if k not in ("preset", "nodes") and v is not None}


def compare_cluster(preset: str, size: ClusterSize | int, settings: dict[str, object] | None = None) -> ClusterSpec:
    """A shipped or user cluster preset at ``size`` (a ``ClusterSize``, or a node count), with
    ``settings`` (cluster keys of the scenario, ``own_cluster_settings``) on it."""
    if isinstance(size, int):
        size = ClusterSize(size)
    check_at_most("--nodes", size.nodes, MAX_GPUS, "nodes")
    keys = dict(settings or {})
    if size.scale_up_domain:
        keys["scale_up_domain"] = size.scale_up_domain
    cluster = load_cluster(preset, size.nodes, **keys)
    if size.gpus_per_node:
        cluster = part_of_node(cluster, size.gpus_per_node)
    if cluster.num_gpus > MAX_GPUS:
        raise InputError("--nodes", size.nodes, f"a size of at most {MAX_GPUS:,} GPUs (clustersim's limit; "
                                                f"{size.nodes:,} nodes of {preset} hold {cluster.num_gpus:,})")
    return cluster


def check_compare_size(clusters: list[str], sizes: list[int] | None) -> None:
    """Refuse (exit 2) more than MAX_COMPARE_SWEEPS sweeps (clusters x node counts) up front."""
    n = len(clusters) * len(sizes or [0])
    if n > MAX_COMPARE_SWEEPS:
        raise InputError("--clusters x --nodes", f"{len(clusters)} x {len(sizes or [0])} = {n} sweeps",
                         f"at most {MAX_COMPARE_SWEEPS} sweeps per comparison (clustersim's limit; each is a full "
                         "layout sweep)")


def run_interval(level: float, step_lo: float, step_hi: float, row: dict[str, object]) -> dict[str, object]:
    """The compare row's interval from its step-time interval (clustersim.uncertainty, carried by
    the sweep's best row): time to train, cost and energy all scale linearly with the step time
    (same tokens, same power draw)."""
    step = float(row["step_time_s"])  # type: ignore[arg-type]
    lo, hi = step_lo / step, step_hi / step

    def span(key: str) -> list[float]:
        value = float(row[key])  # type: ignore[arg-type]
        return [value * lo, value * hi]

    return {"level": level, "step_time_s": [step_lo, step_hi], "time_to_train_s": span("time_to_train_s"),
            "cost_usd": span("cost_usd"), "energy_kwh": span("energy_kwh")}


RANK_KEYS = {"time": "time_to_train_s", "cost": "cost_usd", "energy": "energy_kwh"}


def rank_rows(rows: list[dict[str, object]], by: str) -> list[dict[str, object]]:
    """Rows sorted by time to train, cost or energy (ties: cluster name, then nodes), numbered."""
    if by not in RANK_KEYS:
        raise InputError("--rank-by", by, tuple(RANK_KEYS))
    key = RANK_KEYS[by]
    out = sorted(rows, key=lambda r: (float(r[key]), str(r["cluster"]), int(r["nodes"])))  # type: ignore[arg-type]
    return [{**r, "rank": i + 1} for i, r in enumerate(out)]
