"""hardware_profiles/*.yaml -> frozen specs. The single place where profile units are converted.

Shipped profiles live in ``hardware_profiles/`` (``gpus.yaml``, ``fabrics.yaml``,
``clusters.yaml``, each a mapping of name -> fields). Users add their own, for example the
calibrated profile that ``clustersim validate`` writes, with ``add_profile_file(PATH)``, the
``--profile FILE`` option, or the ``CLUSTERSIM_PROFILES`` environment variable
(``os.pathsep``-separated files). Such a file holds any of the sections ``gpus:``, ``fabrics:``
and ``clusters:``; its entries shadow shipped ones of the same name.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.errors import InputError
from clustersim.hardware.spec import (
    DTYPES,
    FABRIC_KINDS,
    CalibrationEvidence,
    ClusterSpec,
    FabricSpec,
    GpuSpec,
)
from clustersim.inputs import read_yaml_file

SECTIONS = ("gpus", "fabrics", "clusters")
_GPU_KEYS = {"description", "peak_TFLOPS", "vector_TFLOPS", "hbm_capacity_MiB", "hbm_capacity_GiB",
             "hbm_bw_GBps", "l2_MiB", "num_sms", "tdp_W", "price_per_gpu_hour_usd", "gemm_efficiency",
             "gemm_scale", "attention_scale", "hbm_efficiency", "compute_scale"}
_FABRIC_KEYS = {"kind", "description", "bw_GBps", "bw_Gbps", "efficiency", "latency_us",
                "switch_latency_us", "nvls", "nvls_bw_GBps", "nvls_latency_us"}
_CLUSTER_KEYS = {"description", "gpu", "gpus_per_node", "scale_up", "scale_out", "nics_per_node", "pcie",
                 "nodes_per_leaf", "oversubscription", "host_memory_GiB", "nodes", "calibration"}
CLUSTER_OVERRIDE_KEYS = ("gpu", "gpus_per_node", "scale_up", "scale_out", "nics_per_node", "pcie",
                         "nodes_per_leaf", "oversubscription", "host_memory_GiB")

_user_files: list[Path] = []


def shipped_profile_dir() -> Path:
    """The shipped profiles: inside the installed package, else the repository's top level."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "data" / "hardware_profiles", here.parent / "hardware_profiles"):
        if (candidate / "gpus.yaml").exists():
            return candidate
    raise FileNotFoundError("hardware_profiles/ not found next to the clustersim package")


def add_profile_file(path: str | os.PathLike[str]) -> None:
    """Register a user profile file (sections gpus/fabrics/clusters); later files win."""
    p = Path(path)
    if not p.is_file():
        raise InputError("--profile", str(path), "an existing YAML profile file")
    _user_files.append(p.resolve())


def use_profiles(paths: list[str] | tuple[str, ...]) -> None:
    """``--profile FILE ...`` of run, sweep and compare: register the files in this process and in
    CLUSTERSIM_PROFILES, so that worker processes (sweep's process pool, Dask on this machine)
    load the same presets."""
    for p in paths:
        add_profile_file(p)
    if paths:
        old = os.environ.get("CLUSTERSIM_PROFILES")
        os.environ["CLUSTERSIM_PROFILES"] = os.pathsep.join([*filter(None, [old]), *(str(Path(p).resolve())
                                                                                     for p in paths)])


def _read_yaml(path: Path) -> Any:
    return read_yaml_file(path, "profile", "a YAML hardware profile") or {}


def _env_files() -> list[Path]:
    raw = os.environ.get("CLUSTERSIM_PROFILES", "")
    return [Path(p) for p in raw.split(os.pathsep) if p]


@functools.cache
def _catalog_for(user_files: tuple[tuple[Path, int, int], ...]) -> dict[str, dict[str, dict[str, Any]]]:
    cat: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in SECTIONS}
    shipped = shipped_profile_dir()
    for section in SECTIONS:
        cat[section].update(_read_yaml(shipped / f"{section}.yaml"))
    for path, _, _ in user_files:
        data = _read_yaml(path)
        if not isinstance(data, Mapping) or not set(data) <= set(SECTIONS):
            raise InputError(f"profile {path}", sorted(data) if isinstance(data, Mapping) else data,
                             f"a mapping with sections {', '.join(SECTIONS)}")
        for section, entries in data.items():
            cat[section].update(entries or {})
    return cat


def _file_key(path: Path) -> tuple[Path, int, int]:
    """A user file and its modification time and size: a file rewritten (a new calibration into
    the same path) is read again."""
    try:
        st = path.stat()
    except OSError:
        return path, 0, 0
    return path, st.st_mtime_ns, st.st_size


def _catalog() -> dict[str, dict[str, dict[str, Any]]]:
    return _catalog_for(tuple(_file_key(p) for p in (*_env_files(), *_user_files)))




def _entry(section: str, name: str) -> dict[str, Any]:
    entries = _catalog()[section]
    if name not in entries:
        field = {"gpus": "gpu", "fabrics": "fabric", "clusters": "cluster.preset"}[section]
        raise InputError(field, name, sorted(entries))
    return dict(entries[name])


def _check_keys(where: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}", data[unknown[0]], f"keys {', '.join(sorted(allowed))}")


def _positive(where: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise InputError(where, value, "a positive number")
    return float(value)


def list_gpus() -> list[str]:
    return sorted(_catalog()["gpus"])


def list_fabrics() -> list[str]:
    return sorted(_catalog()["fabrics"])


def list_clusters() -> list[str]:
    return sorted(_catalog()["clusters"])


def describe(section: str, name: str) -> dict[str, Any]:
    """The raw profile entry (for `clustersim list`)."""
    return _entry(section, name)


def load_gpu(name: str) -> GpuSpec:
    d = _entry("gpus", name)
    where = f"gpus.{name}"
    _check_keys(where, d, _GPU_KEYS)
    peaks = d.get("peak_TFLOPS") or {}
    bad = sorted(set(peaks) - set(DTYPES))
    if bad:
        raise InputError(f"{where}.peak_TFLOPS.{bad[0]}", peaks[bad[0]], DTYPES)
    if "hbm_capacity_MiB" in d:
        capacity = int(_positive(f"{where}.hbm_capacity_MiB", d["hbm_capacity_MiB"]) * units.MiB)
    else:
        capacity = int(_positive(f"{where}.hbm_capacity_GiB", d.get("hbm_capacity_GiB")) * units.GiB)
    return GpuSpec(
        name=name,
        peak_flops_per_s=tuple((k, _positive(f"{where}.peak_TFLOPS.{k}", v) * units.TFLOPS) for k, v in peaks.items()),
        hbm_capacity_bytes=capacity,
        hbm_bw_bytes_per_s=_positive(f"{where}.hbm_bw_GBps", d.get("hbm_bw_GBps")) * units.GB,
        vector_flops_per_s=float(d.get("vector_TFLOPS", 0.0)) * units.TFLOPS,
        l2_bytes=int(float(d.get("l2_MiB", 0)) * units.MiB),
        num_sms=int(d.get("num_sms", 0)),
        tdp_w=float(d.get("tdp_W", 0.0)),
        price_per_gpu_hour_usd=float(d.get("price_per_gpu_hour_usd", 0.0)),
        gemm_efficiency=float(d.get("gemm_efficiency", 0.0)),
        gemm_scale=_positive(f"{where}.gemm_scale", d.get("gemm_scale", 1.0)),
        attention_scale=_positive(f"{where}.attention_scale", d.get("attention_scale", 1.0)),
        hbm_efficiency=float(d.get("hbm_efficiency", 0.0)),
        compute_scale=_positive(f"{where}.compute_scale", d.get("compute_scale", 1.0)),
        description=str(d.get("description", "")),
    )


def load_fabric(name: str) -> FabricSpec:
    d = _entry("fabrics", name)
    where = f"fabrics.{name}"
    _check_keys(where, d, _FABRIC_KEYS)
    if d.get("kind") not in FABRIC_KINDS:
        raise InputError(f"{where}.kind", d.get("kind"), FABRIC_KINDS)
    if "bw_Gbps" in d:
        bw = _positive(f"{where}.bw_Gbps", d["bw_Gbps"]) * units.GBIT
    else:
        bw = _positive(f"{where}.bw_GBps", d.get("bw_GBps")) * units.GB
    eff = _positive(f"{where}.efficiency", d.get("efficiency", 1.0))
    if eff > 1:
        raise InputError(f"{where}.efficiency", eff, "a fraction in (0, 1]")
    return FabricSpec(
        name=name,
        kind=d["kind"],
        bw_bytes_per_s=bw,
        latency_s=_positive(f"{where}.latency_us", d.get("latency_us")) * units.US,
        efficiency=eff,
        switch_latency_s=float(d.get("switch_latency_us", 0.0)) * units.US,
        nvls=bool(d.get("nvls", False)),
        nvls_bw_bytes_per_s=float(d.get("nvls_bw_GBps", 0.0)) * units.GB,
        nvls_latency_s=float(d.get("nvls_latency_us", 0.0)) * units.US,
        description=str(d.get("description", "")),
    )


def load_cluster(preset: str, num_nodes: int | None = None, **overrides: Any) -> ClusterSpec:
    """Build a cluster from a preset plus contract overrides (gpu, gpus_per_node, scale_up, ...)."""
    d = _entry("clusters", preset)
    _check_keys(f"clusters.{preset}", d, _CLUSTER_KEYS)
    for key, value in overrides.items():
        if key not in CLUSTER_OVERRIDE_KEYS:
            raise InputError(f"cluster.{key}", value, CLUSTER_OVERRIDE_KEYS)
        if value is not None:
            d[key] = value
    nodes = num_nodes if num_nodes is not None else d.get("nodes", 1)
    for key, value in (("nodes", nodes), ("gpus_per_node", d.get("gpus_per_node")),
                       ("nics_per_node", d.get("nics_per_node", 1)), ("nodes_per_leaf", d.get("nodes_per_leaf", 32))):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"cluster.{key}", value, "a positive integer")
    oversub = _positive("cluster.oversubscription", d.get("oversubscription", 1.0))
    if oversub < 1:
        raise InputError("cluster.oversubscription", oversub, "a number >= 1 (1 = full bisection)")
    return ClusterSpec(
        name=preset,
        gpu=load_gpu(d["gpu"]),
        num_nodes=nodes,
        gpus_per_node=d["gpus_per_node"],
        scale_up=load_fabric(d["scale_up"]),
        scale_out=load_fabric(d["scale_out"]),
        nics_per_node=d.get("nics_per_node", 1),
        nodes_per_leaf=d.get("nodes_per_leaf", 32),
        oversubscription=oversub,
        pcie=load_fabric(d["pcie"]) if d.get("pcie") else None,
        host_memory_bytes=int(float(d.get("host_memory_GiB", 0)) * units.GiB),
        description=str(d.get("description", "")),
        calibration=load_evidence(f"clusters.{preset}.calibration", d.get("calibration")),
    )


def load_evidence(where: str, raw: Any) -> CalibrationEvidence | None:
    """The ``calibration:`` mapping of a calibrated cluster entry (None when absent)."""
    if raw is None:
        return None
    keys = {"runs", "loo_rel_errors", "source", "date"}
    if not isinstance(raw, Mapping) or not set(raw) <= keys or "loo_rel_errors" not in raw:
        raise InputError(where, raw, "a mapping with runs, loo_rel_errors (a list of predicted/measured - 1), "
                                     "source, date")
    errors = raw["loo_rel_errors"]
    if not isinstance(errors, list) or not all(isinstance(e, (int, float)) and not isinstance(e, bool)
                                               and -1 < e < 100 for e in errors):
        raise InputError(f"{where}.loo_rel_errors", errors, "a list of numbers greater than -1")
    runs = raw.get("runs", len(errors))
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < len(errors):
        raise InputError(f"{where}.runs", runs, f"an integer >= the number of loo_rel_errors ({len(errors)})")
    return CalibrationEvidence(runs=runs, loo_rel_errors=tuple(float(e) for e in errors),
                               source=str(raw.get("source", "")), date=str(raw.get("date", "unknown")))


def with_nodes(cluster: ClusterSpec, num_nodes: int) -> ClusterSpec:
    return replace(cluster, num_nodes=num_nodes)
