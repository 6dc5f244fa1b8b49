"""The ``goodput:`` section of a scenario: failure rates, checkpointing, storage and restart.

All keys are optional; absent keys take the defaults below, each with its source. Every value is
checked by pydantic (unknown keys, non-finite numbers and out-of-range values are InputErrors
naming ``goodput.<key>``) and resolved once into the frozen GoodputSpec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from clustersim.errors import InputError
from clustersim.goodput.rates import CLASSES, DEFAULT_MTBF_H, DEFAULT_PLANNED_INTERVAL_H
from clustersim.section_model import Section

# Llama 3 paper (arXiv 2407.21783), section 3.3.1: Tectonic "supports a sustainable throughput of
# 2 TB/s and a peak throughput of 7 TB/s"; the sustained figure is the default for writes and reads.
DEFAULT_STORAGE_BW_GBPS = 2000.0
# Detection of a failure: a rank that dies leaves the others blocked in a collective until the
# watchdog aborts them; torchtitan's timeout after the first step is 100 s
# (torchtitan/config/job_config.py, Comm.train_timeout_seconds = 100).
DEFAULT_DETECT_S = 100.0
# [ASSUMED] Re-queue: the scheduler swaps the failed node for a spare and health-checks the new
# allocation. No public measurement at 10k-GPU scale was found; 5 minutes. Override it.
DEFAULT_REQUEUE_S = 300.0
# [ASSUMED] Process start, model construction and NCCL communicator set-up of every rank, before
# the checkpoint load. No public measurement at 10k-GPU scale was found; 2 minutes (torchtitan
# allows 300 s for initialisation and the first step: Comm.init_timeout_seconds). Override it.
DEFAULT_INIT_S = 120.0
# Monte-Carlo repetitions of the whole run: the spread of 200 runs is enough for p10/p90.
DEFAULT_TRIALS = 200



def _positive(default: float | None = None) -> Any:
    """A finite number > 0 (None: the default applies)."""
    return Field(default, gt=0, allow_inf_nan=False)


def _non_negative(default: float) -> Any:
    return Field(default, ge=0, allow_inf_nan=False)




class MtbfSection(Section):
    """MTBF of one component of each class, in hours (default: Llama 3 paper, Table 5)."""

    gpu: float | None = _positive()
    node: float | None = _positive()
    nic: float | None = _positive()
    switch: float | None = _positive()
    software: float | None = _positive()


class GoodputSection(Section):
    mtbf_h: MtbfSection = MtbfSection()
    planned_interval_h: float | None = _positive(DEFAULT_PLANNED_INTERVAL_H)
    checkpoint: Literal["sync", "async"] = "sync"
    checkpoint_interval_min: float | None = _positive()
    storage_write_bw_GBps: float = _positive(DEFAULT_STORAGE_BW_GBPS)
    storage_read_bw_GBps: float | None = _positive()
    node_storage_bw_GBps: float | None = _positive()
    snapshot_bw_GBps: float | None = _positive()
    parallel_load: bool = False
    detect_s: float = _non_negative(DEFAULT_DETECT_S)
    requeue_s: float = _non_negative(DEFAULT_REQUEUE_S)
    init_s: float = _non_negative(DEFAULT_INIT_S)
    trials: int = Field(DEFAULT_TRIALS, ge=1, le=10_000)
    seed: int = Field(0, ge=0)


@dataclass(frozen=True, slots=True)
class GoodputSpec:
    """How a whole training run fails, checkpoints and restarts (SI units: seconds, bytes/s).

    ``mtbf_h``: (class, hours) pairs for every class of clustersim.goodput.rates.CLASSES.
    ``planned_interval_s``: mean time between planned interruptions (0 = none).
    ``checkpoint``: "sync" (training waits for the write) or "async" (training waits only for
    the GPU-to-host snapshot; the write to storage runs behind the next steps).
    ``checkpoint_interval_s``: training time between checkpoints; 0 = search the best.
    ``node_storage_bw_bytes_per_s`` 0 = no per-node limit; ``snapshot_bw_bytes_per_s`` 0 = the
    cluster's host link (``ClusterSpec.host_memory_link``: NVLink-C2C on GB200, else PCIe). ``parallel_load``: each checkpoint shard is read once and exchanged
    (Megatron's --ckpt-fully-parallel-load) instead of every rank reading its whole state.
    """

    mtbf_h: tuple[tuple[str, float], ...] = tuple(DEFAULT_MTBF_H.items())
    planned_interval_s: float = DEFAULT_PLANNED_INTERVAL_H * 3600.0
    checkpoint: str = "sync"
    checkpoint_interval_s: float = 0.0
    storage_write_bw_bytes_per_s: float = DEFAULT_STORAGE_BW_GBPS * 1e9
    storage_read_bw_bytes_per_s: float = DEFAULT_STORAGE_BW_GBPS * 1e9
    node_storage_bw_bytes_per_s: float = 0.0
    snapshot_bw_bytes_per_s: float = 0.0
    parallel_load: bool = False
    detect_s: float = DEFAULT_DETECT_S
    requeue_s: float = DEFAULT_REQUEUE_S
    init_s: float = DEFAULT_INIT_S
    trials: int = DEFAULT_TRIALS
    seed: int = 0

    def __post_init__(self) -> None:
        """The same bounds as the scenario section, for specs built in code (clustersim.api users)."""
        names = [c for c, _ in self.mtbf_h]
        if sorted(names) != sorted(CLASSES):
            raise InputError("goodput.mtbf_h", names, f"one MTBF for each of {', '.join(CLASSES)}")
        positive = [(f"goodput.mtbf_h.{c}", h) for c, h in self.mtbf_h] + [
            ("goodput.storage_write_bw_GBps", self.storage_write_bw_bytes_per_s),
            ("goodput.storage_read_bw_GBps", self.storage_read_bw_bytes_per_s)]
        non_negative = [("goodput.planned_interval_h", self.planned_interval_s),
                        ("goodput.checkpoint_interval_min", self.checkpoint_interval_s),
                        ("goodput.node_storage_bw_GBps", self.node_storage_bw_bytes_per_s),
                        ("goodput.snapshot_bw_GBps", self.snapshot_bw_bytes_per_s),
                        ("goodput.detect_s", self.detect_s), ("goodput.requeue_s", self.requeue_s),
                        ("goodput.init_s", self.init_s)]
        for field, value in positive:
            if not (math.isfinite(value) and value > 0):
                raise InputError(field, value, "a finite number > 0")
        for field, value in non_negative:
            if not (math.isfinite(value) and value >= 0):
                raise InputError(field, value, "a finite number >= 0 (0 = none / the default)")
        if self.checkpoint not in ("sync", "async"):
            raise InputError("goodput.checkpoint", self.checkpoint, "sync, async")
        if not 1 <= self.trials <= 10_000 or self.seed < 0:
            raise InputError("goodput.trials", (self.trials, self.seed), "trials 1..10000 and seed >= 0")

    @property
    def mtbf(self) -> dict[str, float]:
        return dict(self.mtbf_h)


def goodput_spec(section: GoodputSection | None) -> GoodputSpec:
    """The validated section resolved into a GoodputSpec (defaults where keys are absent)."""
    s = section or GoodputSection()
    mtbf = {c: getattr(s.mtbf_h, c) or DEFAULT_MTBF_H[c] for c in CLASSES}
    write = s.storage_write_bw_GBps * 1e9
    return GoodputSpec(
        mtbf_h=tuple((c, float(mtbf[c])) for c in CLASSES),
        planned_interval_s=(s.planned_interval_h or 0.0) * 3600.0,
        checkpoint=s.checkpoint,
        checkpoint_interval_s=(s.checkpoint_interval_min or 0.0) * 60.0,
        storage_write_bw_bytes_per_s=write,
        storage_read_bw_bytes_per_s=s.storage_read_bw_GBps * 1e9 if s.storage_read_bw_GBps else write,
        node_storage_bw_bytes_per_s=(s.node_storage_bw_GBps or 0.0) * 1e9,
        snapshot_bw_bytes_per_s=(s.snapshot_bw_GBps or 0.0) * 1e9,
        parallel_load=s.parallel_load,
        detect_s=s.detect_s, requeue_s=s.requeue_s, init_s=s.init_s,
        trials=s.trials, seed=s.seed,
    )


__all__ = ["GoodputSection", "GoodputSpec", "MtbfSection", "goodput_spec"]
