"""Training frameworks as data: the implementation defaults a scenario's ``framework:`` selects.

The same model and layout allocate memory and spend time differently under Megatron-Core,
Megatron-LM as in its 2021-22 papers ("megatron-legacy"), torchtitan and DeepSpeed (attention
kernel, ZeRO-3 flavour, gradient reduction dtype, ...). ``clustersim/data/frameworks.yaml`` holds
one entry per framework with the source-code path of every value; it is read once into a frozen
``FrameworkSpec`` that the scenario carries, so that cost models read plain fields and never ask
"which framework?" themselves (STYLE.md habit 13).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path

from clustersim.errors import InputError
from clustersim.inputs import read_yaml_file

FRAMEWORK_FILE = Path(__file__).resolve().parent / "data" / "frameworks.yaml"
DEFAULT_FRAMEWORK = "megatron-core"
ATTENTION_KERNELS = ("flash", "standard")
ZERO3_IMPLS = ("megatron-fsdp", "fsdp1", "fsdp2", "deepspeed")
REDUCE_DTYPES = ("fp32", "bf16")
TP_BACKWARD_OVERLAP = ("always", "with-sp", "never")
_BOOLS = ("overlap_grad_reduce", "overlap_param_gather")


@dataclass(frozen=True, slots=True)
class FrameworkSpec:
    """Implementation defaults of one training framework (see clustersim/data/frameworks.yaml)."""

    name: str
    description: str
    attention: str          # the kernel `training.attention: auto` resolves to: flash | standard
    # --- timing (issue 8): defaults of how the implementation overlaps communication ---
    overlap_grad_reduce: bool    # data-parallel gradient reduction overlapped with the backward pass
    overlap_param_gather: bool   # ZeRO-1/2 parameter all-gather overlapped with the next forward pass
    tp_backward_overlap: str     # backward TP collectives beside the GEMMs: always | with-sp | never
    zero3: str              # ZeRO-3 implementation: megatron-fsdp | fsdp1 | fsdp2 | deepspeed
    grad_reduce_dtype: str  # dtype of the data-parallel gradient reduction: fp32 | bf16


_CHOICES = {"attention": ATTENTION_KERNELS, "zero3": ZERO3_IMPLS, "grad_reduce_dtype": REDUCE_DTYPES}


@functools.cache
def _catalog() -> dict[str, FrameworkSpec]:
    raw = read_yaml_file(FRAMEWORK_FILE, "frameworks", "the framework defaults file")
    keys = [f.name for f in fields(FrameworkSpec) if f.name != "name"]
    out = {}
    for name, entry in raw.items():
        where = f"frameworks.yaml: {name}"
        if not isinstance(entry, dict) or set(entry) != set(keys):
            got = sorted(entry) if isinstance(entry, dict) else entry
            raise InputError(where, got, f"exactly the keys {', '.join(keys)}")
        for key, allowed in _CHOICES.items():
            if entry[key] not in allowed:
                raise InputError(f"{where}.{key}", entry[key], allowed)
        for key in _BOOLS:
            if not isinstance(entry[key], bool):
                raise InputError(f"{where}.{key}", entry[key], "true or false")
        if entry["tp_backward_overlap"] not in TP_BACKWARD_OVERLAP:
            raise InputError(f"{where}.tp_backward_overlap", entry["tp_backward_overlap"], TP_BACKWARD_OVERLAP)
        out[name] = FrameworkSpec(name=name, **{k: entry[k] for k in keys})
    return out


def framework_names() -> tuple[str, ...]:
    return tuple(_catalog())


def load_framework(name: str) -> FrameworkSpec:
    """The frozen defaults of framework ``name``; InputError naming the allowed frameworks."""
    catalog = _catalog()
    if name not in catalog:
        raise InputError("framework", name, tuple(catalog))
    return catalog[name]
