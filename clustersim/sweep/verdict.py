"""What a sweep's ranking says, in words: `clustersim sweep` prints these lines under its table,
``--json`` carries them as ``verdict`` and ``--html`` shows them under the top layouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.sweep.evaluate import COL
from clustersim.sweep.objective import not_plain_reasons, plain_mask
from clustersim.sweep.result import SweepResult, intervals_overlap
from clustersim.units import GiB


def layout_label(p: Mapping[str, Any]) -> str:
    """``tp8 pp8 dp16 mb1 z1 selective sp 1f1b``: a layout in a few words, with every setting that
    tells it apart where it is not the default (ep, expert_tp, the CP exchange, offload, a stated
    pipeline layout), so that the row can be reproduced from its label (the sweep's verdict
    lines, its HTML page and compare's table)."""
    parts = [f"tp{p['tp']}", f"pp{p['pp']}", f"dp{p['dp']}"]
    if int(p.get("cp", 1)) > 1:
        parts.append(f"cp{p['cp']}")
    if int(p.get("ep") or 1) > 1:
        parts.append(f"ep{p['ep']}")
    if p.get("expert_tp") and p["expert_tp"] != p["tp"]:
        parts.append(f"etp{p['expert_tp']}")
    if p.get("cp_comm") and int(p.get("cp", 1)) > 1:
        parts.append(str(p["cp_comm"]))
    parts += [f"mb{p['micro_batch']}", f"z{p['zero_stage']}", str(p["recompute"])]
    if p.get("sequence_parallel"):
        parts.append("sp")
    offload = p.get("offload")
    if isinstance(offload, dict) and any(offload.values()):
        parts.append("offload " + "+".join(k for k, v in offload.items() if v))
    sched = str(p["schedule"]) + (f" v{p['virtual_stages']}" if int(p.get("virtual_stages", 1)) > 1 else "")
    if p.get("pipeline_layout"):   # a split Megatron-Core builds only from this flag (sweep.result.stated_split)
        sched += f" layout {p['pipeline_layout']}"
    return " ".join([*parts, sched])


def verdict(result: SweepResult, rows: list[dict]) -> list[str]:
    """What the intervals say about the ranking: which top rows the winner cannot be told apart
    from, whether the winner's regime is validated by measured runs, and, when the winner is not
    a plain 3D layout, how it compares with the best plain 3D one."""
    if not rows:
        return []
    lines = []
    if len(rows) > 1:
        lines.append(tied_line(result.indistinguishable(rows), float(rows[0]["interval"]["level"]), "step-time"))
    else:   # --top 1: nothing listed to compare it with
        lines.append("#1 only: list more (--top N) to see which layouts its 80% interval cannot tell apart from it")
    iv = rows[0]["interval"]
    lines.append(regime_line("#1", iv["regime"], iv["validated"], iv["widened_for"], iv["evidence_runs"]))
    tight = tight_line(rows[0])
    if tight:
        lines.append(tight)
    plain = plain_line(result, rows[0])
    if plain:
        lines.append(plain)
    return lines


def tied_line(tied: Sequence[int], level: float, interval: str, noun: str = "layout", ahead: str = "faster",
              names: Sequence[str] = ()) -> str:
    """Which listed rows the best one cannot be told apart from (``tied``: 0-based indices from
    result.overlapping_best), in words: the sweep's layouts by step time, `compare`'s rows by the
    ranked quantity (``names``: each row's name, by index, shown after its number)."""
    def who(i: int) -> str:
        return f"#{i + 1}" + (f" ({names[i]})" if names else "")

    if not tied:
        return f"{who(0)} is {ahead} than every other listed {noun} beyond their {level:.0%} intervals"
    which = (f"{noun}s {', '.join(who(i) for i in tied)} are" if len(tied) > 1 else f"{noun} {who(tied[0])} is")
    return (f"{which} indistinguishable from {who(0)} within their {level:.0%} intervals (the {interval} "
            "intervals overlap)")


def regime_line(who: str, regime: str, validated: bool, widened_for: Sequence[str], evidence_runs: int) -> str:
    """Whether a row's interval rests on measured runs of its regime (clustersim.uncertainty), and
    if not, why it was widened: the sweep's #1 and every `compare` row that is not validated."""
    if validated:
        return f"{who}'s regime ({regime}) is validated by {evidence_runs} measured runs"
    return f"{who}'s regime ({regime}) is NOT validated: " + "; ".join(widened_for or [f"{evidence_runs} measured runs"])


def tight_line(row: Mapping[str, Any]) -> str:
    """When #1 is ``tight`` (its memory interval straddles the GPU's capacity): how far its predicted
    peak is from the capacity, so that a peak above it does not read as a layout that fits."""
    if row["memory_verdict"] != "tight":
        return ""
    peak, free = float(row["peak_bytes_per_gpu"]), float(row["free_bytes_per_gpu"])
    capacity = peak + free
    if free < 0:
        return (f"#1's predicted peak ({peak / GiB:.1f} GiB) exceeds the GPU's {capacity / GiB:.1f} GiB: it fits "
                "only at the low end of its memory interval, so no listed layout fits for certain")
    return (f"#1 is tight: its predicted peak ({peak / GiB:.1f} GiB) leaves {free / GiB:.1f} GiB of "
            f"{capacity / GiB:.1f}, within its memory interval's uncertainty")


def _versus(field: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """``a`` against ``b`` in one ranked metric, in words."""
    x, y = float(a[field]), float(b[field])
    if field == "free_bytes_per_gpu":
        return f"{x / GiB:.1f} GiB free per GPU against {y / GiB:.1f}"
    what, unit = {"step_time_s": ("step time", " s"), "p90_step_time_s": ("p90 step time", " s"),
                  "cost_usd_per_million_tokens": ("USD per million tokens", ""),
                  "gpu_hours_per_million_tokens": ("GPU-hours per million tokens", "")}[field]
    word = "lower" if x <= y else "higher"
    return f"{what} {x:.4g}{unit} against {y:.4g}{unit} ({abs(1 - x / y):.1%} {word})"


def plain_line(result: SweepResult, best: Mapping[str, Any]) -> str | None:
    """One line comparing #1 with the best plain 3D layout (objective.plain_mask), when #1 is not one."""
    if best["plain_3d"]:
        return None
    head = f"#1 is not a plain 3D layout ({', '.join(not_plain_reasons(best['parallel']))})"
    found = result.best_plain()
    if found is None:
        t = result.table
        plain = plain_mask(t)
        if not plain.any():
            within = f" the constraints ({result.spec.constraints.describe()}) leave" if result.spec.constraints \
                else " the search space has"
            return f"{head};{within} no plain 3D layout"
        if not (plain & (t[:, COL["fits"]] == 1.0)).any():
            return f"{head}; no plain 3D layout fits in memory"
        return f"{head}; the best plain 3D layout was not searched for"
    k, other = found
    parts = [_versus("step_time_s", best, other)]
    if result.ranked_field != "step_time_s":
        parts.append(_versus(result.ranked_field, best, other))
    inside = ("their 80% step-time intervals overlap: within the uncertainty" if intervals_overlap(best, other)
              else "their 80% step-time intervals do not overlap: beyond the uncertainty")
    return (f"{head}; against the best plain 3D layout, #{k} ({layout_label(other['parallel'])}): "
            f"{'; '.join(parts)}; {inside}")
