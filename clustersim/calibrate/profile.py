"""Write a calibrated hardware profile: a YAML file with ``gpus:``, ``fabrics:`` and
``clusters:`` sections that clustersim.hardware.load reads like the shipped profiles
(``--profile FILE`` / ``CLUSTERSIM_PROFILES``). Every number carries, in a comment beside it,
the measurement it came from.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from clustersim import units


@dataclass(frozen=True, slots=True)
class CalibratedGpu:
    name: str
    peak_flops_per_s: float       # measured fp32 GEMM rate (gemm_efficiency 1.0 applies it as is)
    mem_bw_bytes_per_s: float     # measured memory copy (read + write bytes / time)
    capacity_bytes: int
    source: str                   # what was measured, how, when
    dtype: str = "fp32"


@dataclass(frozen=True, slots=True)
class CalibratedFabric:
    name: str
    kind: str
    bw_bytes_per_s: float         # nominal rate of the port (tc rate, NIC line rate)
    efficiency: float             # achieved / nominal for large transfers (fitted)
    latency_s: float              # per latency term of the simulator's formulas (fitted)
    source: str
    latency_note: str = "fitted: per latency term of the collective formulas"


@dataclass(frozen=True, slots=True)
class CalibratedCluster:
    name: str
    gpu: str
    gpus_per_node: int
    nodes: int
    scale_up: str
    scale_out: str
    nics_per_node: int
    source: str


def fabric_from_fit(name: str, kind: str, nominal_bw_bytes_per_s: float | None, achieved_bw_bytes_per_s: float,
                    latency_s: float, source: str, latency_note: str | None = None) -> CalibratedFabric:
    """Split an achieved bandwidth into nominal rate x efficiency (efficiency <= 1)."""
    note = {"latency_note": latency_note} if latency_note else {}
    if nominal_bw_bytes_per_s and achieved_bw_bytes_per_s <= nominal_bw_bytes_per_s:
        return CalibratedFabric(name, kind, nominal_bw_bytes_per_s,
                                achieved_bw_bytes_per_s / nominal_bw_bytes_per_s, latency_s, source, **note)
    return CalibratedFabric(name, kind, achieved_bw_bytes_per_s, 1.0, latency_s, source, **note)


def _num(x: float) -> str:
    """Six significant digits that YAML reads back as a number (PyYAML's YAML 1.1 wants a dot
    in the mantissa of an exponent form: 1e-05 would be a string, 1.0e-05 is a float)."""
    text = f"{x:.6g}"
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exp = text.split("e")
        text = f"{mantissa}.0e{exp}"
    return text


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid double-quoted YAML scalar


def _comment(text: str) -> str:
    return " ".join(text.split())


def render_profile(gpus: list[CalibratedGpu], fabrics: list[CalibratedFabric],
                   clusters: list[CalibratedCluster], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines.append("gpus:")
    for g in sorted(gpus, key=lambda g: g.name):
        lines += [f"  {g.name}:",
                  f"    description: {_q('calibrated device (' + _comment(g.source) + ')')}",
                  f"    peak_TFLOPS: {{{g.dtype}: {_num(g.peak_flops_per_s / units.TFLOPS)}}}"
                  f"  # measured GEMM rate, {_comment(g.source)}",
                  "    gemm_efficiency: 1.0  # the peak above is already the measured GEMM rate",
                  f"    hbm_bw_GBps: {_num(g.mem_bw_bytes_per_s / units.GB)}  # measured memory copy (read+write bytes / time)",
                  f"    hbm_capacity_GiB: {_num(g.capacity_bytes / units.GiB)}  # host memory per rank"]
    lines.append("fabrics:")
    for f in sorted(fabrics, key=lambda f: f.name):
        lines += [f"  {f.name}:",
                  f"    kind: {f.kind}",
                  f"    description: {_q('calibrated fabric (' + _comment(f.source) + ')')}",
                  f"    bw_GBps: {_num(f.bw_bytes_per_s / units.GB)}  # nominal port rate per direction",
                  f"    efficiency: {_num(f.efficiency)}  # fitted: achieved bandwidth / nominal",
                  f"    latency_us: {_num(max(f.latency_s, 1e-9) / units.US)}  # {_comment(f.latency_note)}"]
    lines.append("clusters:")
    for c in sorted(clusters, key=lambda c: c.name):
        lines += [f"  {c.name}:",
                  f"    description: {_q('calibrated cluster (' + _comment(c.source) + ')')}",
                  f"    gpu: {c.gpu}",
                  f"    gpus_per_node: {c.gpus_per_node}",
                  f"    nodes: {c.nodes}",
                  f"    scale_up: {c.scale_up}",
                  f"    scale_out: {c.scale_out}",
                  f"    nics_per_node: {c.nics_per_node}"]
    return "\n".join(lines) + "\n"


def write_profile(path: Path, text: str) -> Path:
    """Write atomically: a temporary file beside ``path``, fsync, then a rename."""
    from clustersim.output_file import write_text_atomic
    write_text_atomic(path, text)
    return path


@contextlib.contextmanager
def profile_in_env(profile: Path) -> Iterator[None]:
    """Make ``profile`` visible to the hardware loader (CLUSTERSIM_PROFILES) for the duration,
    without touching the loader's process-wide list of user files."""
    old = os.environ.get("CLUSTERSIM_PROFILES")
    os.environ["CLUSTERSIM_PROFILES"] = os.pathsep.join([str(profile.resolve()), *filter(None, [old])])
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CLUSTERSIM_PROFILES", None)
        else:
            os.environ["CLUSTERSIM_PROFILES"] = old


# -- profiles derived from a shipped preset (clustersim calibrate) ------------------------------

Entry = list[tuple[str, object, str]]   # (key, value, comment) in file order


def entry_from_raw(raw: dict[str, object], overrides: Entry, note: str = "as the base preset") -> Entry:
    """A profile entry: the base entry's keys (with ``note`` as comment) and then ``overrides``,
    which replace keys of the same name and carry their own comments."""
    replaced = {k for k, _, _ in overrides}
    kept = [(k, v, note) for k, v in raw.items() if k not in replaced and k != "description"]
    return kept + list(overrides)


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return _q(str(value))


def render_entries(header: str, sections: dict[str, dict[str, tuple[str, Entry]]]) -> str:
    """YAML text of ``sections`` (gpus / fabrics / clusters -> name -> (description, entry)),
    every value with its comment beside it."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for section in ("gpus", "fabrics", "clusters"):
        entries = sections.get(section, {})
        lines.append(f"{section}:" + ("" if entries else " {}"))
        for name in sorted(entries):
            description, entry = entries[name]
            lines += [f"  {name}:", f"    description: {_q(_comment(description))}"]
            for key, value, comment in entry:
                if isinstance(value, dict) and value and all(isinstance(v, (list, tuple)) for v in value.values()):
                    lines.append(f"    {key}:  # {_comment(comment)}")   # a mapping of sequences (evidence)
                    lines += [f"      {k}: {_yaml_value(v)}" for k, v in value.items()]
                elif isinstance(value, dict) and key == "calibration":
                    lines.append(f"    {key}:  # {_comment(comment)}")
                    lines += [f"      {k}: {_yaml_value(v)}" for k, v in value.items()]
                else:
                    lines.append(f"    {key}: {_yaml_value(value)}  # {_comment(comment)}")
    return "\n".join(lines) + "\n"
