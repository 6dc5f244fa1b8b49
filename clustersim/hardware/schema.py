"""The schema of hardware profile files, checked entry by entry when a file is read.

Every entry of every section of every profile file (shipped or given with ``--profile`` /
``CLUSTERSIM_PROFILES``) is checked in full when the catalog is built, including entries that no
scenario uses: an unknown key, a missing required key, a wrong type or a value out of range is an
InputError (exit 2) whose field names the file, the entry and the key, e.g.
``profile my.yaml: gpus.my-gpu.peak_TFLOPS.bf16``. References between sections (a cluster's
``gpu``, ``scale_up``, ``scale_out``, ``pcie``) are checked once all files are merged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.hardware.evidence import load_evidence
from clustersim.hardware.spec import (
    DTYPES,
    FABRIC_KINDS,
    MICROSCALING,
    SCALE_OUT_TOPOLOGIES,
    VENDORS,
)
from clustersim.limits import MAX_GPUS, MAX_PROFILE_NUMBER, MAX_PUE, MIN_PROFILE_NUMBER, MIN_PUE

Check = Callable[[Any], str | None]  # None when the value is fine, else what is allowed


def _number(value: Any) -> bool:
    """A finite number within MAX_PROFILE_NUMBER (1e308 TFLOPS is no GPU; clustersim.limits)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and abs(value) <= MAX_PROFILE_NUMBER


def positive(value: Any) -> str | None:
    return None if _number(value) and value >= MIN_PROFILE_NUMBER else \
        f"a positive number from {MIN_PROFILE_NUMBER:g} to {MAX_PROFILE_NUMBER:g}"


def pue_value(value: Any) -> str | None:
    return None if _number(value) and MIN_PUE <= value <= MAX_PUE else f"a number from {MIN_PUE:g} to {MAX_PUE:g}"


def non_negative(value: Any) -> str | None:
    return None if _number(value) and value >= 0 else f"a number >= 0 (at most {MAX_PROFILE_NUMBER:g})"


def fraction(value: Any) -> str | None:
    return None if _number(value) and 0 < value <= 1 else "a fraction in (0, 1]"


def at_least_one(value: Any) -> str | None:
    return None if _number(value) and value >= 1 else f"a number >= 1 (at most {MAX_PROFILE_NUMBER:g})"


def positive_int(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_GPUS
    return None if ok else f"a positive integer (at most {MAX_GPUS:,})"


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"one of {', '.join(choices)}"
    return check


def list_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, list) and all(v in choices for v in value) and len(set(value)) == len(value)
        return None if ok else f"a list of distinct values from {', '.join(choices)}"
    return check


GPU_KEYS: dict[str, Check] = {
    "description": text, "peak_TFLOPS": lambda v: None, "vector_TFLOPS": positive,
    "hbm_capacity_MiB": positive, "hbm_capacity_GiB": positive, "hbm_bw_GBps": positive, "l2_MiB": positive,
    "num_sms": positive_int, "tdp_W": positive, "price_per_gpu_hour_usd": non_negative, "gemm_efficiency": fraction,
    "microscaling": list_of(MICROSCALING), "vendor": one_of(VENDORS),
    # constants `clustersim calibrate` fits for one machine (clustersim.hardware.spec.GpuSpec)
    "gemm_scale": positive, "attention_scale": positive, "hbm_efficiency": fraction, "compute_scale": positive,
}
GPU_REQUIRED = ("peak_TFLOPS", "hbm_bw_GBps")
FABRIC_KEYS: dict[str, Check] = {
    "kind": one_of(FABRIC_KINDS), "description": text, "bw_GBps": positive, "bw_Gbps": positive,
    "efficiency": fraction, "latency_us": positive, "switch_latency_us": non_negative, "nvls": boolean,
    "nvls_bw_GBps": positive, "nvls_max_algbw_GBps": positive, "links_per_gpu": positive_int,
    "switch_chips": positive_int, "switch_trays": positive_int, "nvls_latency_us": positive,
}
FABRIC_REQUIRED = ("kind", "latency_us")
CLUSTER_KEYS: dict[str, Check] = {
    "description": text, "gpu": text, "gpus_per_node": positive_int, "scale_up": text, "scale_out": text,
    "nics_per_node": positive_int, "pcie": text, "host_link": text, "nodes_per_leaf": positive_int, "oversubscription": at_least_one,
    "host_memory_GiB": positive, "host_memory_bw_GBps": positive, "nodes": positive_int, "scale_up_domain": positive_int,
    "topology": one_of(SCALE_OUT_TOPOLOGIES), "nodes_per_pod": positive_int, "pod_oversubscription": at_least_one,
    "node_power_kW": positive, "pue": pue_value,
    "calibration": lambda v: None,  # checked in full by evidence.load_evidence (check_entry)
}
CLUSTER_REQUIRED = ("gpu", "gpus_per_node", "scale_up", "scale_out")
SCHEMAS = {"gpus": (GPU_KEYS, GPU_REQUIRED), "fabrics": (FABRIC_KEYS, FABRIC_REQUIRED),
           "clusters": (CLUSTER_KEYS, CLUSTER_REQUIRED)}


def _where(path: Path, section: str, name: object, key: str = "") -> str:
    return f"profile {path.name}: {section}.{name}" + (f".{key}" if key else "")


def _check_gpu_extras(path: Path, name: str, entry: Mapping[str, Any]) -> None:
    peaks = entry.get("peak_TFLOPS")
    if not isinstance(peaks, Mapping) or not peaks:
        raise InputError(_where(path, "gpus", name, "peak_TFLOPS"), peaks,
                         f"a mapping of dtype to dense TFLOPS with keys from {', '.join(DTYPES)}")
    for dtype, value in peaks.items():
        if dtype not in DTYPES:
            raise InputError(_where(path, "gpus", name, f"peak_TFLOPS.{dtype}"), value, f"dtypes {', '.join(DTYPES)}")
        if positive(value):
            raise InputError(_where(path, "gpus", name, f"peak_TFLOPS.{dtype}"), value, "a positive number")
    if "hbm_capacity_MiB" not in entry and "hbm_capacity_GiB" not in entry:
        raise InputError(_where(path, "gpus", name, "hbm_capacity_MiB"), None, "hbm_capacity_MiB or hbm_capacity_GiB")


def check_entry(path: Path, section: str, name: object, entry: Any) -> None:
    """Raise InputError unless ``entry`` is a valid ``section`` entry (keys, types, ranges)."""
    keys, required = SCHEMAS[section]
    if not isinstance(name, str) or not name:
        raise InputError(_where(path, section, name), name, "entry names that are non-empty strings")
    if not isinstance(entry, Mapping):
        raise InputError(_where(path, section, name), entry, f"a mapping with keys {', '.join(sorted(keys))}")
    for key, value in entry.items():
        if key not in keys:
            raise InputError(_where(path, section, name, str(key)), value,
                             f"unknown key; allowed keys: {', '.join(sorted(keys))}", choices=keys, key=str(key))
        allowed = keys[key](value)
        if allowed is not None:
            raise InputError(_where(path, section, name, key), value, allowed)
    for key in required:
        if key not in entry:
            raise InputError(_where(path, section, name, key), None, "this key is required")
    if section == "gpus":
        _check_gpu_extras(path, name, entry)
    if section == "clusters" and "calibration" in entry:
        load_evidence(_where(path, section, name, "calibration"), entry["calibration"])
    if section == "fabrics" and "bw_GBps" not in entry and "bw_Gbps" not in entry:
        raise InputError(_where(path, section, name, "bw_GBps"), None, "bw_GBps or bw_Gbps")
    if section == "fabrics" and entry.get("kind") == "xgmi" and "links_per_gpu" not in entry:
        raise InputError(_where(path, section, name, "links_per_gpu"), None, "a positive integer for an xgmi mesh")


def check_file(path: Path, data: Any, sections: tuple[str, ...]) -> None:
    """Check every entry of every section of one profile file."""
    if not isinstance(data, Mapping) or not set(data) <= set(sections):
        raise InputError(f"profile {path.name}", sorted(map(str, data)) if isinstance(data, Mapping) else data,
                         f"a mapping with sections {', '.join(sections)}")
    for section, entries in data.items():
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            raise InputError(f"profile {path.name}: {section}", entries, "a mapping of entry name -> fields")
        for name, entry in entries.items():
            check_entry(path, section, name, entry)


def check_references(catalog: Mapping[str, Mapping[str, Any]], origin: Mapping[tuple[str, str], Path]) -> None:
    """Every cluster must name a GPU and fabrics that exist in the merged catalog."""
    for name, entry in catalog["clusters"].items():
        path = origin[("clusters", name)]
        for key, section in (("gpu", "gpus"), ("scale_up", "fabrics"), ("scale_out", "fabrics"), ("pcie", "fabrics"),
                             ("host_link", "fabrics")):
            ref = entry.get(key)
            if ref is not None and ref not in catalog[section]:
                raise InputError(_where(path, "clusters", name, key), ref, sorted(catalog[section]))
        domain, gpn = entry.get("scale_up_domain"), entry.get("gpus_per_node")
        if domain is not None and domain % gpn:
            raise InputError(_where(path, "clusters", name, "scale_up_domain"), domain,
                             f"a multiple of gpus_per_node ({gpn})")

