"""`clustersim compare`: the best layout per cluster and size, time to train and cost.

Arithmetic (per cluster and size, with the best layout's simulated throughput):
    time_to_train_s = tokens / tokens_per_s
    gpu_hours       = gpus * time_to_train_s / 3600
    cost_usd        = gpu_hours * price_per_gpu_hour_usd
The price comes from the GPU profile (``price_per_gpu_hour_usd``, with its source and date in
hardware_profiles/gpus.yaml) unless ``--price-per-gpu-hour`` overrides it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_COMPARE_SWEEPS, MAX_GPUS, check_at_most
from clustersim.scenario import Scenario

SECONDS_PER_HOUR = 3600.0
TOKEN_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_TOKENS_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]?)\s*$")
_TOKENS_ALLOWED = "a positive token count, a number with an optional suffix K, M, B or T (1e3..1e12), e.g. 1T or 300B"


def parse_tokens(text: str | float | int) -> float:
    """``"1T"`` -> 1e12, ``"300B"`` -> 3e11, ``"2.5M"`` -> 2.5e6, ``"1e9"`` -> 1e9 tokens."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _TOKENS_RE.match(str(text))
        if not m or m.group(2).upper() not in TOKEN_SUFFIX:
            raise InputError("--tokens", text, _TOKENS_ALLOWED)
        value = float(m.group(1)) * TOKEN_SUFFIX[m.group(2).upper()]
    if not math.isfinite(value) or value <= 0:
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
        out[name] = _price(value.strip(), item)
    return out


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
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise InputError(option, text, "a comma-separated list")
    if kind is int:
        try:
            values = [int(t) for t in items]
        except ValueError:
            raise InputError(option, text, "comma-separated positive integers, e.g. 16,32,64") from None
        if any(v < 1 for v in values):
            raise InputError(option, text, "comma-separated positive integers, e.g. 16,32,64")
        return values
    return items


def scenario_on(scenario: Scenario, cluster: ClusterSpec) -> Scenario:
    """The same job on another cluster; the dtype must exist on its GPU."""
    if scenario.training.dtype not in cluster.gpu.dtypes:
        raise InputError("training.dtype", scenario.training.dtype,
                         f"a dtype that {cluster.gpu.name} ({cluster.name}) has: {', '.join(cluster.gpu.dtypes)}")
    return replace(scenario, cluster=cluster)


def compare_cluster(preset: str, nodes: int) -> ClusterSpec:
    """A shipped or user cluster preset at ``nodes`` nodes (InputError names the presets)."""
    check_at_most("--nodes", nodes, MAX_GPUS, "nodes")
    cluster = load_cluster(preset, nodes)
    if cluster.num_gpus > MAX_GPUS:
        raise InputError("--nodes", nodes, f"a size of at most {MAX_GPUS:,} GPUs (clustersim's limit; {nodes:,} "
                                           f"nodes of {preset} hold {cluster.num_gpus:,})")
    return cluster


def check_compare_size(clusters: list[str], sizes: list[int] | None) -> None:
    """Refuse (exit 2) more than MAX_COMPARE_SWEEPS sweeps (clusters x node counts) up front."""
    n = len(clusters) * len(sizes or [0])
    if n > MAX_COMPARE_SWEEPS:
        raise InputError("--clusters x --nodes", f"{len(clusters)} x {len(sizes or [0])} = {n} sweeps",
                         f"at most {MAX_COMPARE_SWEEPS} sweeps per comparison (clustersim's limit; each is a full "
                         "layout sweep)")
