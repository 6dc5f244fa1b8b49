"""Which measured cases set which calibrated constant of `clustersim validate`, and the check
that the written profile reproduces them (docs/validation.md, "Fit points").

A constant is only as good as the cases it is fitted to: a case that does not measure what
the constant means drags it (in 2026-11 one 64 KiB ping-pong, served by the shaper's burst,
pulled the fitted link to 1.24 Gbit/s on a link shaped to 1 Gbit/s). So each constant takes the
fit cases that measure it, by the physics of the run mode:

* **GEMM rate**: every fit GEMM shape; **memory bandwidth**: the memory copy.
* **Link bandwidth, network namespaces** (``tc tbf`` at rate r with a bucket of ``burst``
  bytes per port and direction): a token bucket passes up to ``burst`` bytes at the unshaped
  veth speed after an idle moment, and only the average rate is held to r. A ping-pong of S <
  burst alternates directions, so each direction's bucket refills while the reply travels, and
  one message takes S / 2r, half of what the link rate says (measured 2026-11-26: 64 KiB in
  0.269 ms, 65536 B / 0.269 ms = 2 x 122 MB/s on a 125 MB/s link). A case sets the bandwidth
  when each port sends at least ``BUCKET_MULTIPLE`` x burst in one operation, so that the
  bucket can shorten it by at most 1 / BUCKET_MULTIPLE (less with several calls per sample).
* **Link bandwidth, loopback**: there is no link; the ranks' cores copy the bytes through the
  kernel's TCP stack. A ring collective sends and receives at once on each core; a ping-pong
  sends one way at a time and runs about twice as fast (gloo alpha-beta 2.1 vs 1.2 GB/s,
  `validate --ci`, 2026-11-26). The simulator's ports are full duplex with one bandwidth, so the
  loopback profile takes it from the ring all_reduce (the collective of the training steps'
  gradients), and from its largest size per world size only: gloo's per-step cost (0.2-0.9 ms,
  moving with the machine's load) is comparable to the transfer time of the smaller ones.

The latency stays the measured TCP ping (one way): gloo's software cost per ring step (0.04-1
ms, with the machine's load) is not a property of the link, and the simulator's per-step costs
come from NCCL's tables (docs/validation.md).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from clustersim.calibrate.compare import CaseResult
from clustersim.calibrate.fit import textbook_terms

BUCKET_MULTIPLE = 8          # bytes per port per operation >= 8 x the tbf burst (bucket share <= 1/8)
FIT_CHECK_LIMIT_PCT = 10.0   # a constant whose fit points the profile misses by more (median) is broken
CONSTANTS = ("gemm", "memory", "fabric")


@dataclass(frozen=True, slots=True)
class Selection:
    """The cases each constant is fitted to, and the fit cases left out with why."""

    used: dict[str, str]          # case name -> constant ("gemm", "memory", "fabric")
    skipped: dict[str, str]       # case name -> why it sets no constant


def select(records: list[dict[str, Any]], mode: str, link: dict[str, Any]) -> Selection:
    used: dict[str, str] = {}
    skipped: dict[str, str] = {}
    burst = float(link.get("burst_bytes") or 0.0)
    largest: dict[int, float] = {}
    for r in records:
        if r.get("role") == "fit" and r["kind"] == "collective" and r["params"]["op"] == "all_reduce":
            w = r["params"]["world"]
            largest[w] = max(largest.get(w, 0.0), r["params"]["size_bytes"])
    for r in records:
        if r.get("role") != "fit":
            continue
        p = r["params"]
        if r["kind"] == "compute":
            used[r["name"]] = "gemm" if p["bench"] == "gemm" else "memory"
            continue
        if r["kind"] != "collective":
            continue
        if mode == "netns":
            wire_bytes = textbook_terms(p["op"], p["world"], p["size_bytes"])[1]
            if wire_bytes >= BUCKET_MULTIPLE * burst:
                used[r["name"]] = "fabric"
            else:
                skipped[r["name"]] = (f"{wire_bytes / 1e3:.0f} kB per port, under {BUCKET_MULTIPLE} x the shaper's "
                                      f"burst ({burst / 1e3:.0f} kB): the burst can carry much of it, so it does "
                                      "not measure the rate")
            continue
        if p["op"] != "all_reduce":
            skipped[r["name"]] = ("one direction at a time on loopback (a ring sends and receives at once on each "
                                  "core): not the ring's port rate")
        elif p["size_bytes"] < largest[p["world"]]:
            skipped[r["name"]] = ("not the largest all_reduce of its world size: on loopback gloo's per-step cost "
                                  "(0.2-0.9 ms, with the load) is comparable to its transfer time")
        else:
            used[r["name"]] = "fabric"
    if mode == "netns" and "fabric" not in used.values():   # a shaper burst above every size: the largest stand in
        # not a ping-pong (send_recv): one message at a time under the shaper measures its burst and
        # latency, not its rate (docs/validation.md); it made the ci check fail at random (+7% to +22%)
        coll = [r for r in records if r.get("role") == "fit" and r["kind"] == "collective"
                and r["params"]["op"] != "send_recv"] or \
            [r for r in records if r.get("role") == "fit" and r["kind"] == "collective"]
        wire = {r["name"]: textbook_terms(r["params"]["op"], r["params"]["world"], r["params"]["size_bytes"])[1]
                for r in coll}
        for name, b in wire.items():
            if b == max(wire.values()):
                used[name] = "fabric"
                skipped.pop(name, None)
    return Selection(used, skipped)


@dataclass(frozen=True, slots=True)
class FitCheck:
    """How well the profile as written reproduces the cases each constant was fitted to."""

    per_constant: dict[str, dict[str, Any]]
    limit_pct: float = FIT_CHECK_LIMIT_PCT

    @property
    def ok(self) -> bool:
        return all(v["median_abs_error_pct"] <= self.limit_pct for v in self.per_constant.values())

    @property
    def failed(self) -> list[str]:
        return [k for k, v in self.per_constant.items() if v["median_abs_error_pct"] > self.limit_pct]

    def to_json(self) -> dict[str, Any]:
        return {"limit_pct": self.limit_pct, "ok": self.ok, "constants": self.per_constant}


def check(results: list[CaseResult], used: dict[str, str], limit_pct: float = FIT_CHECK_LIMIT_PCT) -> FitCheck:
    """Median |error| per constant over its fit points, predicted with the written profile."""
    errs: dict[str, list[tuple[str, float]]] = {}
    for c in results:
        if c.name in used:
            errs.setdefault(used[c.name], []).append((c.name, c.error_pct))
    per = {k: {"cases": len(v), "median_abs_error_pct": round(statistics.median(abs(e) for _, e in v), 3),
               "points": {n: round(e, 3) for n, e in v}}
           for k, v in sorted(errs.items(), key=lambda kv: CONSTANTS.index(kv[0]))}
    return FitCheck(per, limit_pct)
