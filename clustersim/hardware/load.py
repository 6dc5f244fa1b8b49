"""hardware_profiles/*.yaml -> frozen specs. The single place where profile units are converted.

Shipped profiles live in ``hardware_profiles/`` (``gpus.yaml``, ``fabrics.yaml``,
``clusters.yaml``, each a mapping of name -> fields). Users add their own, for example the
calibrated profile that ``clustersim validate`` writes, with ``add_profile_file(PATH)``, the
``--profile FILE`` option, or the ``CLUSTERSIM_PROFILES`` environment variable
(``os.pathsep``-separated files). Such a file holds any of the sections ``gpus:``, ``fabrics:``
and ``clusters:``; its entries shadow shipped ones of the same name.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.errors import InputError
from clustersim.hardware import schema
from clustersim.hardware.evidence import load_evidence
from clustersim.hardware.spec import ClusterSpec, FabricSpec, GpuSpec
from clustersim.inputs import read_yaml_file

SECTIONS = ("gpus", "fabrics", "clusters")
CLUSTER_OVERRIDE_KEYS = ("gpu", "gpus_per_node", "scale_up", "scale_out", "nics_per_node", "pcie", "host_link",
                         "nodes_per_leaf", "oversubscription", "host_memory_GiB", "scale_up_domain", "topology",
                         "nodes_per_pod", "pod_oversubscription", "pue")

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


def shipped_names(section: str) -> set[str]:
    """The names of the shipped profiles' ``section`` (gpus, fabrics, clusters)."""
    return set(_read_yaml(shipped_profile_dir() / f"{section}.yaml"))


def _names_in(path: Path) -> dict[str, set[str]]:
    """The entry names of a profile file, by section."""
    data = _read_yaml(path)
    return {s: set((data.get(s) or {}) if isinstance(data, dict) else ()) for s in SECTIONS}


def _check_distinct_names(paths: list[Path]) -> None:
    """Two --profile files that define one name: the later one won without a word (two calibrations
    both written as preset `calibrated`). Exit 2 naming the name and both files."""
    seen: dict[tuple[str, str], Path] = {}
    for p in dict.fromkeys(paths):   # one file given twice is one file
        for section, names in _names_in(p).items():
            for name in sorted(names):
                if (section, name) in seen:
                    raise InputError("--profile", str(p), f"profile files with distinct names: {section}.{name} is "
                                     f"defined in {seen[(section, name)]} and in {p}; write one of them under "
                                     "another name (calibrate --name)")
                seen[(section, name)] = p


def use_profiles(paths: list[str] | tuple[str, ...]) -> None:
    """``--profile FILE ...`` of run, sweep and compare: register the files in this process and in
    CLUSTERSIM_PROFILES, so that worker processes (sweep's process pool, Dask on this machine)
    load the same presets."""
    for p in paths:
        add_profile_file(p)
    _check_distinct_names([Path(p).resolve() for p in paths])
    if paths:
        old = os.environ.get("CLUSTERSIM_PROFILES")
        os.environ["CLUSTERSIM_PROFILES"] = os.pathsep.join([*filter(None, [old]), *(str(Path(p).resolve())
                                                                                     for p in paths)])


def check_profiles_used(paths: list[str] | tuple[str, ...], cluster: ClusterSpec) -> None:
    """A --profile file with a calibrated cluster preset that the scenario does not use (its
    cluster.preset, GPU and fabrics are none of the file's): `run j71.yaml --profile one.yaml`
    without `cluster.preset: one` applied nothing and said nothing. Exit 2 naming cluster.preset
    and the file's presets."""
    used = {"clusters": {cluster.name}, "gpus": {cluster.gpu.name},
            "fabrics": {f.name for f in (cluster.scale_up, cluster.scale_out, cluster.pcie, cluster.host_link)
                        if f is not None}}
    for p in paths:
        names = _names_in(Path(p))
        calibrated = sorted(n for n in names["clusters"] if "calibration" in (_entry("clusters", n) or {}))
        if calibrated and not any(names[s] & used[s] for s in SECTIONS):
            raise InputError("cluster.preset", cluster.name,
                             f"a cluster preset of --profile {p} ({', '.join(sorted(names['clusters']))}): its "
                             f"calibration applies only with cluster.preset {' or '.join(calibrated)} (--set "
                             f"cluster.preset={calibrated[0]}); this scenario uses nothing of the file")


@contextlib.contextmanager
def profiles_restored() -> Iterator[None]:
    """Forget, on exit, the profiles registered inside (``use_profiles``: this process's list and
    CLUSTERSIM_PROFILES), as a command run in its own process would: for callers that run several
    CLI commands in one process (tests, benchmarks)."""
    files, env = list(_user_files), os.environ.get("CLUSTERSIM_PROFILES")
    try:
        yield
    finally:
        _user_files[:] = files
        if env is None:
            os.environ.pop("CLUSTERSIM_PROFILES", None)
        else:
            os.environ["CLUSTERSIM_PROFILES"] = env


def _read_yaml(path: Path) -> Any:
    return read_yaml_file(path, "profile", "a YAML hardware profile") or {}


def _env_files() -> list[Path]:
    raw = os.environ.get("CLUSTERSIM_PROFILES", "")
    return [Path(p) for p in raw.split(os.pathsep) if p]


@functools.cache
def _catalog_for(user_files: tuple[tuple[Path, int, int], ...]) -> dict[str, dict[str, dict[str, Any]]]:
    """Shipped profiles, then user files (later ones win); every entry of every file is checked."""
    cat: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in SECTIONS}
    origin: dict[tuple[str, str], Path] = {}
    shipped = shipped_profile_dir()
    files = [(shipped / f"{section}.yaml", {section: _read_yaml(shipped / f"{section}.yaml")}) for section in SECTIONS]
    files += [(path, _read_yaml(path)) for path, _, _ in user_files]
    for path, data in files:
        schema.check_file(path, data, SECTIONS)
        for section, entries in data.items():
            for name, entry in (entries or {}).items():
                cat[section][name] = entry
                origin[(section, name)] = path
    schema.check_references(cat, origin)
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
        if section == "clusters":
            from clustersim.hardware.find_profile import missing_cluster_hint
            raise InputError(field, name, ", ".join(sorted(entries)) + missing_cluster_hint(name),
                             choices=sorted(entries))
        raise InputError(field, name, sorted(entries))
    return dict(entries[name])


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
    d = _entry("gpus", name)  # keys, types and ranges were checked when the catalog was read
    if "hbm_capacity_MiB" in d:
        capacity = int(d["hbm_capacity_MiB"] * units.MiB)
    else:
        capacity = int(d["hbm_capacity_GiB"] * units.GiB)
    return GpuSpec(
        name=name,
        peak_flops_per_s=tuple((k, float(v) * units.TFLOPS) for k, v in d["peak_TFLOPS"].items()),
        hbm_capacity_bytes=capacity,
        hbm_bw_bytes_per_s=float(d["hbm_bw_GBps"]) * units.GB,
        vector_flops_per_s=float(d.get("vector_TFLOPS", 0.0)) * units.TFLOPS,
        l2_bytes=int(float(d.get("l2_MiB", 0)) * units.MiB),
        num_sms=int(d.get("num_sms", 0)),
        tdp_w=float(d.get("tdp_W", 0.0)),
        price_per_gpu_hour_usd=float(d.get("price_per_gpu_hour_usd", 0.0)),
        gemm_efficiency=float(d.get("gemm_efficiency", 0.0)),
        microscaling=tuple(d.get("microscaling", ())),
        vendor=str(d.get("vendor", "nvidia")),
        gemm_scale=float(d.get("gemm_scale", 1.0)),
        attention_scale=float(d.get("attention_scale", 1.0)),
        hbm_efficiency=float(d.get("hbm_efficiency", 0.0)),
        compute_scale=float(d.get("compute_scale", 1.0)),
        description=str(d.get("description", "")),
    )


def load_fabric(name: str) -> FabricSpec:
    d = _entry("fabrics", name)
    bw = float(d["bw_Gbps"]) * units.GBIT if "bw_Gbps" in d else float(d["bw_GBps"]) * units.GB
    return FabricSpec(
        name=name,
        kind=d["kind"],
        bw_bytes_per_s=bw,
        latency_s=float(d["latency_us"]) * units.US,
        efficiency=float(d.get("efficiency", 1.0)),
        switch_latency_s=float(d.get("switch_latency_us", 0.0)) * units.US,
        nvls=bool(d.get("nvls", False)),
        nvls_bw_bytes_per_s=float(d.get("nvls_bw_GBps", 0.0)) * units.GB,
        nvls_max_algbw_bytes_per_s=float(d.get("nvls_max_algbw_GBps", 0.0)) * units.GB,
        links_per_gpu=int(d.get("links_per_gpu", 0)),
        switch_chips=int(d.get("switch_chips", 0)),
        switch_trays=int(d.get("switch_trays", 0)),
        nvls_latency_s=float(d.get("nvls_latency_us", 0.0)) * units.US,
        description=str(d.get("description", "")),
    )


def _override(key: str, value: Any, where: str) -> None:
    """A scenario override of a cluster preset field: the same checks as the profile schema."""
    check = schema.CLUSTER_KEYS.get(key)
    allowed = check(value) if check is not None else None
    if allowed is not None:
        raise InputError(where, value, allowed)


def _part(d: dict[str, Any], key: str, overrides: dict[str, Any]) -> FabricSpec | None:
    """The fabric a cluster names for ``key``; None where it names none (``null``: the preset's own
    or no such part). Any string is looked up, so that ``host_link: ""`` exits 2 naming the key
    instead of dropping the part (an NVL72's NVLink-C2C silently replaced by PCIe)."""
    name = d.get(key)
    if name is None:
        return None
    try:
        return load_fabric(name)
    except InputError as exc:
        raise exc.with_field(f"cluster.{key}") if key in overrides else exc from None


def check_domain(cluster: ClusterSpec) -> None:
    """The scale-up domain must hold whole nodes and the job whole domains (or fit in one)."""
    domain = cluster.scale_up_domain
    if not domain:
        return
    if domain % cluster.gpus_per_node:
        raise InputError("cluster.scale_up_domain", domain,
                         f"a multiple of gpus_per_node ({cluster.gpus_per_node}): a domain holds whole nodes")
    if cluster.num_gpus > domain and cluster.num_gpus % domain:
        raise InputError("cluster.scale_up_domain", domain,
                         f"a divisor of the GPU count {cluster.num_gpus} (nodes {cluster.num_nodes} x "
                         f"gpus_per_node {cluster.gpus_per_node}), or a job of at most one domain")


def load_cluster(preset: str, num_nodes: int | None = None, **overrides: Any) -> ClusterSpec:
    """Build a cluster from a preset plus contract overrides (gpu, gpus_per_node, scale_up, ...)."""
    d = _entry("clusters", preset)
    preset_node = (d.get("gpu"), d.get("gpus_per_node"))
    for key, value in overrides.items():
        if key not in CLUSTER_OVERRIDE_KEYS:
            raise InputError(f"cluster.{key}", value, CLUSTER_OVERRIDE_KEYS)
        if value is not None:
            _override(key, value, f"cluster.{key}")
            d[key] = value
    nodes = num_nodes if num_nodes is not None else d.get("nodes", 1)
    if positive_int_error := schema.positive_int(nodes):
        raise InputError("cluster.nodes", nodes, positive_int_error)
    cluster = ClusterSpec(
        name=preset,
        gpu=load_gpu(d["gpu"]),
        num_nodes=nodes,
        gpus_per_node=d["gpus_per_node"],
        scale_up=_part(d, "scale_up", overrides),
        scale_out=_part(d, "scale_out", overrides),
        # a preset given fewer GPUs per node keeps one NIC per GPU at most (check_nics)
        nics_per_node=(min(d.get("nics_per_node", 1), d["gpus_per_node"])
                       if overrides.get("gpus_per_node") is not None and overrides.get("nics_per_node") is None
                       else d.get("nics_per_node", 1)),
        nodes_per_leaf=d.get("nodes_per_leaf", 32),
        oversubscription=float(d.get("oversubscription", 1.0)),
        pcie=_part(d, "pcie", overrides),
        host_link=_part(d, "host_link", overrides),
        host_memory_bytes=int(float(d.get("host_memory_GiB", 0)) * units.GiB),
        host_memory_bw_bytes_per_s=float(d.get("host_memory_bw_GBps", 0)) * units.GB,
        scale_up_domain=int(d.get("scale_up_domain", 0)),
        topology=str(d.get("topology", "fat-tree")),
        nodes_per_pod=int(d.get("nodes_per_pod", 0)),
        pod_oversubscription=float(d.get("pod_oversubscription", 1.0)),
        # the preset's datasheet node power holds for its own GPUs only: with another GPU or
        # another count per node, clustersim.energy's per-GPU rule (TDP + host share) applies
        node_power_w=float(d.get("node_power_kW", 0.0)) * 1e3 if (d["gpu"], d["gpus_per_node"]) == preset_node else 0.0,
        pue=float(d.get("pue", 0.0)),
        description=str(d.get("description", "")),
        # a calibration holds for the GPU it was fitted on: with another (cluster.gpu), no fitted
        # factor applies and the scenario is an uncalibrated one (docs/calibration.md)
        calibration=(load_evidence(f"clusters.{preset}.calibration", d.get("calibration"))
                     if d["gpu"] == preset_node[0] else None),
    )
    check_domain(cluster)
    check_fabric_roles(cluster, overrides)
    check_nics(cluster, preset, overrides)
    check_factors_applied(cluster, preset)
    return cluster


_FABRIC_KNOBS = {"bw": lambda f: f.bw_bytes_per_s * f.efficiency, "latency": lambda f: f.latency_s,
                 "nvls_bw": lambda f: f.nvls_bw_bytes_per_s, "nvls_latency": lambda f: f.nvls_latency_s}


def check_factors_applied(cluster: ClusterSpec, preset: str) -> None:
    """A calibrated cluster whose GPU or fabrics no longer hold the factors its ``calibration:``
    reports (a profile edited after calibrate: compute_scale 0.5 applied while the calibration
    showed 0.909 and the fit's before and after, the run it was fitted to outside its own
    interval). Exit 2 naming the field: the factors reported must be the factors applied."""
    ev = cluster.calibration
    for i, f in enumerate(ev.factors if ev is not None else ()):
        tier, _, knob = f.name.rpartition(".")
        if tier in ("scale_up", "scale_out") and knob in _FABRIC_KNOBS:
            fabric = getattr(cluster, tier)
            applied, where = _FABRIC_KNOBS[knob](fabric), f"fabrics.{fabric.name} ({tier} {knob})"
        elif not tier and f.name in ("compute_scale", "gemm_scale", "attention_scale", "hbm_efficiency"):
            applied, where = getattr(cluster.gpu, f.name), f"gpus.{cluster.gpu.name}.{f.name}"
        else:
            continue
        if not math.isclose(applied, f.value, rel_tol=1e-4):
            raise InputError(where, f"{applied:.6g}", f"the value clusters.{preset}.calibration.factors[{i}] "
                             f"reports, {f.value:.6g} (the fit's before and after and its interval hold for it): "
                             "a profile edited after calibrate no longer says what was applied; calibrate again, "
                             "or remove its calibration mapping")


def check_nics(cluster: ClusterSpec, preset: str, overrides: dict[str, Any]) -> None:
    """A node has at most one NIC per GPU here: each GPU drives its own port (docs/network.md), so
    a second NIC per GPU would add nothing, and the extra NICs were dropped without a word."""
    if cluster.nics_per_node <= cluster.gpus_per_node:
        return
    key = "cluster.nics_per_node" if overrides.get("nics_per_node") is not None else f"clusters.{preset}.nics_per_node"
    raise InputError(key, cluster.nics_per_node,
                     f"at most gpus_per_node ({cluster.gpus_per_node}), one NIC per GPU; describe several NICs "
                     f"per GPU as one per GPU whose scale-out "
                     f"fabric has their summed bandwidth (a fabric of your own, docs/hardware.md)")


# Which kinds of fabric a scenario may name for a part (fabrics.yaml ``kind``): the network between
# nodes is InfiniBand, RoCE or Ethernet, the host link PCIe. A PCIe or NVLink fabric named as the
# network between nodes was accepted and came out faster than InfiniBand. Profiles are not held to
# it: `clustersim validate` writes CPU clusters whose ranks talk over one measured TCP link, named
# for both parts.
FABRIC_ROLES = {"scale_out": ("infiniband", "roce", "ethernet"), "pcie": ("pcie",), "host_link": ("pcie", "nvlink"),
                "scale_up": ("nvswitch", "xgmi", "pcie")}


def check_fabric_roles(cluster: ClusterSpec, overrides: dict[str, Any]) -> None:
    """InputError naming ``cluster.KEY`` where a scenario sets a part to a fabric of another kind."""
    for key, kinds in FABRIC_ROLES.items():
        fabric = getattr(cluster, key)
        if key in overrides and fabric is not None and fabric.kind not in kinds:
            allowed = sorted(n for n in list_fabrics() if _entry("fabrics", n).get("kind") in kinds)
            raise InputError(f"cluster.{key}", fabric.name,
                             f"a fabric of kind {' / '.join(kinds)} (this one is {fabric.kind}): {', '.join(allowed)}",
                             choices=allowed)


def with_nodes(cluster: ClusterSpec, num_nodes: int) -> ClusterSpec:
    return replace(cluster, num_nodes=num_nodes)
