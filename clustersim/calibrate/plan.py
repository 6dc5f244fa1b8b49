"""The validation plan: which cases the ranks measure, and which of them calibrate the profile.

A case is a plain dict (it travels as JSON to the rank processes)::

    {"name": "all_reduce/w4/8MiB", "kind": "collective", "role": "fit" | "holdout",
     "params": {...}, "timeout_s": 120}

A case with ``emits`` (the compute sweep) measures several items together and yields one
record per item, named as listed.

``fit`` cases set the calibrated constants; ``holdout`` cases are predicted through the
normal simulator with those constants and compared with what was measured. Held-out cases
differ from every fit case in size, world size, collective or kind (whole training steps).

Sizes follow nccl-tests (clustersim's convention, docs/ARCHITECTURE.md): the full buffer for
all_reduce/broadcast/reduce, the gathered total for all_gather/reduce_scatter/all_to_all, the
message for send_recv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustersim import units
from clustersim.errors import InputError

LEVELS = ("ci", "quick", "full")


@dataclass(frozen=True, slots=True)
class Sampling:
    """How each case is timed: warm-up samples dropped, then the median of ``samples``."""

    warmup: int
    samples: int
    min_sample_s: float  # small ops are repeated back to back until one sample lasts this long
    compute_min_sample_s: float  # longer for kernels: averages over the machine's load swings


SAMPLING = {
    "ci": Sampling(warmup=1, samples=3, min_sample_s=0.01, compute_min_sample_s=0.03),
    "quick": Sampling(warmup=2, samples=7, min_sample_s=0.02, compute_min_sample_s=0.15),
    "full": Sampling(warmup=3, samples=11, min_sample_s=0.05, compute_min_sample_s=0.3),
}

# Small GPT-style models for the step cases: (layers, hidden, heads, vocab, seq_len, micro_batch,
# micro-batches per step). Small enough for one CPU core per rank, large enough that a step is
# dominated by GEMMs and the gradient all-reduce rather than by Python overhead.
STEP_MODELS = {
    "ci": {"layers": 2, "hidden": 64, "heads": 2, "vocab": 512, "seq_len": 32, "micro_batch": 2,
           "micro_batches": 2},
    "quick": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 4096, "seq_len": 128, "micro_batch": 4,
              "micro_batches": 4},
    "full": {"layers": 4, "hidden": 384, "heads": 6, "vocab": 8192, "seq_len": 128, "micro_batch": 4,
             "micro_batches": 4},
}


def _size_label(size_bytes: int) -> str:
    for unit, name in ((units.MiB, "MiB"), (units.KiB, "KiB")):
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"{size_bytes // unit}{name}"
    return f"{size_bytes}B"


def collective_case(op: str, world: int, size_bytes: int, role: str) -> dict[str, Any]:
    return {"name": f"{op}/w{world}/{_size_label(size_bytes)}", "kind": "collective", "role": role,
            "params": {"op": op, "world": world, "size_bytes": size_bytes}}


def gemm_case(m: int, n: int, k: int, role: str) -> dict[str, Any]:
    return {"name": f"gemm/{m}x{n}x{k}", "kind": "compute", "role": role,
            "params": {"bench": "gemm", "m": m, "n": n, "k": k}}


def _step_case(kind: str, world: int, model: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {"name": f"{kind}/w{world}", "kind": kind, "role": "holdout",
            "params": {"world": world, "model": dict(model), **extra}}


def _collective_sweep(level: str, nprocs: int) -> list[dict[str, Any]]:
    KiB, MiB = units.KiB, units.MiB
    worlds = [w for w in (2, 4) if w <= nprocs] or [nprocs]
    mid = 3 if nprocs >= 4 else None  # a world size the fit never sees
    if level == "ci":
        fit_sizes = [16 * KiB, 256 * KiB, 2 * MiB]
        hold = [("all_reduce", 2, 1 * MiB), ("all_gather", 2, 512 * KiB), ("send_recv", 2, 1 * MiB)]
    elif level == "quick":
        fit_sizes = [64 * KiB, 1 * MiB, 8 * MiB, 32 * MiB]
        hold = [("all_reduce", worlds[-1], 4 * MiB), ("all_reduce", worlds[-1], 64 * MiB),
                ("all_reduce", worlds[0], 16 * MiB), ("all_gather", worlds[-1], 16 * MiB),
                ("reduce_scatter", worlds[-1], 16 * MiB), ("broadcast", worlds[-1], 8 * MiB),
                ("all_to_all", worlds[-1], 8 * MiB), ("send_recv", 2, 16 * MiB)]
    else:
        fit_sizes = [16 * KiB, 128 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB]
        hold = [(op, w, s) for w in worlds for s in (512 * KiB, 8 * MiB, 32 * MiB)
                for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")]
        hold += [("send_recv", 2, s) for s in (256 * KiB, 8 * MiB, 32 * MiB)]
    fit_worlds = worlds
    if level == "ci":
        # one fit shape per constant, as for the GEMMs (_compute_sweep): the loopback fabric takes
        # the largest all_reduce of each fit world size (fit_points.select), and on a loaded 2-core
        # runner 2 and 4 ranks (4 ranks share 2 cores) land on opposite sides of any one bandwidth
        # (+10% and -13% seen), which failed the ci check. The larger world is held out.
        fit_worlds = worlds[:1]
        hold += [("all_reduce", w, fit_sizes[-1]) for w in worlds[1:]]
    cases = [collective_case("all_reduce", w, s, "fit") for w in fit_worlds for s in fit_sizes]
    cases += [collective_case("send_recv", 2, s, "fit") for s in fit_sizes[:: max(1, len(fit_sizes) - 1)]]
    if mid is not None and level != "ci":
        hold += [("all_reduce", mid, 256 * KiB), ("all_reduce", mid, 8 * MiB), ("all_gather", mid, 8 * MiB)]
    cases += [collective_case(op, w, s, "holdout") for op, w, s in hold]
    return cases


def _compute_sweep(level: str) -> dict[str, Any]:
    """One case that measures every GEMM shape and the memory copy with interleaved samples and
    yields one record per item (``emits``)."""
    if level == "ci":
        # one fit shape: CI checks that the profile reproduces its fit points (fit_points.check),
        # and two tiny shapes differ by more than that in rate on a loaded 2-core runner
        fit = [(256, 256, 256)]
        hold = [(128, 128, 128), (192, 384, 128)]
    else:
        fit = [(512, 512, 512), (1024, 1024, 1024), (512, 1024, 2048)]
        hold = [(768, 768, 768), (512, 3072, 768), (2048, 256, 1024)]
    items = [gemm_case(m, n, k, "fit") for m, n, k in fit]
    items.append({"name": "memcpy", "kind": "compute", "role": "fit",
                  "params": {"bench": "memcpy", "size_bytes": (8 if level == "ci" else 64) * units.MiB}})
    items += [gemm_case(m, n, k, "holdout") for m, n, k in hold]
    return {"name": "compute-sweep", "kind": "compute_sweep", "role": "mixed",
            "params": {"world": 2, "items": items}, "emits": [i["name"] for i in items]}


def record_items(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases as their records will be: a sweep case expands into its items, in order."""
    return [item for c in cases for item in (c["params"]["items"] if "emits" in c else [c])]


def build_plan(level: str, nprocs: int) -> list[dict[str, Any]]:
    """All cases of a validation run at ``level`` with up to ``nprocs`` ranks, in run order."""
    if level not in LEVELS:
        raise InputError("level", level, LEVELS)
    if nprocs < 2:
        raise InputError("--nprocs", nprocs, "at least 2 ranks")
    model = STEP_MODELS[level]
    # Steps run on two ranks, each pinned to its own core, so that compute speed is the
    # measured single-core GEMM rate (see docs/validation.md).
    steps = [_step_case("ddp_step", 2, model, {}),
             _step_case("pp_step", 2, model, {"schedule": "1f1b"})]
    if level != "ci":
        steps += [_step_case("tp_step", 2, model, {}), _step_case("zero1_step", 2, model, {}),
                  _step_case("fsdp_step", 2, model, {})]
    # compute is measured right before the steps it calibrates, so both see the same machine load
    cases = _collective_sweep(level, nprocs) + [_compute_sweep(level)] + steps
    timeout = {"ci": 60, "quick": 120, "full": 300}[level]
    for c in cases:
        # a step case pairs each sample with a local probe (validation/bench_steps.py): twice the work
        c["timeout_s"] = 2 * timeout if c["kind"].endswith("_step") else timeout
    names = [n for c in cases for n in c.get("emits", [c["name"]])]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases
