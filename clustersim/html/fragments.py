"""HTML pieces shared by the reports, the web app and the notebook display (no scripts).

Every function takes JSON-ready data (``StepReport.to_json()`` and friends) and returns escaped
HTML. Keys that other parts of clustersim add over time (``interval``, ``memory.verdict``,
``energy``) are rendered when present and left out when not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.html.page import esc
from clustersim.units import GiB

INTERVAL_KEYS = (("step_time_s", "step time", "s"), ("mfu", "MFU", ""), ("tokens_per_s", "tokens/s", ""))


def fmt_seconds(x: float) -> str:
    return f"{x:.4g} s" if x < 100 else f"{x:,.0f} s"


def fmt_tokens(n: float) -> str:
    """1e12 -> "1T", 3e11 -> "300B", 2.5e6 -> "2.5M" (the suffixes `compare --tokens` reads)."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:.4g}"


ENERGY_UNITS = (("GWh", 1e6), ("MWh", 1e3), ("kWh", 1.0))   # (unit, kWh in one)


def energy_unit(kwh: float) -> tuple[str, float]:
    """The unit a ``kwh`` figure reads in with at least one whole unit (kWh below 1 MWh)."""
    return next((u, v) for u, v in ENERGY_UNITS if kwh >= v or v == 1.0)


def fmt_energy_kwh(kwh: float) -> str:
    """368 -> "368 kWh", 2.5e4 -> "25.0 MWh", 3.1e6 -> "3.1 GWh"."""
    unit, scale = energy_unit(kwh)
    return f"{kwh / scale:,.1f} {unit}" if unit != "kWh" else f"{kwh:,.1f} kWh"


DURATION_UNITS = (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0), ("seconds", 1.0))   # (unit, seconds in one)
MAX_DURATION_DECIMALS = 3


@dataclass(frozen=True, slots=True)
class DurationColumn:
    """One unit and one number of decimals for every duration in a column (`compare`'s time to
    train, readable and HTML), chosen by ``duration_column``."""

    unit: str
    unit_s: float
    decimals: int

    def fmt(self, seconds: float) -> str:
        return f"{seconds / self.unit_s:,.{self.decimals}f}"


def duration_column(seconds: Iterable[float]) -> DurationColumn:
    """The unit and decimals for a column holding ``seconds`` (every value it prints, interval ends
    included): the largest unit in which the shortest reads at least 1 (days, hours, minutes, seconds), and
    at least one decimal, more until the shortest shows 3 significant digits (at most 3 decimals).
    A 1B-token comparison on 8 GPUs (2.3 to 5.0 hours) read "0.1" days on every row under a fixed
    one-decimal day; 86,400 s * [2.3, 20] -> days "2.30", "20.00"."""
    shortest = min((float(s) for s in seconds if math.isfinite(float(s)) and float(s) > 0), default=0.0)
    unit, unit_s = next((u, v) for u, v in DURATION_UNITS if shortest >= v or v == 1.0)
    value = shortest / unit_s
    digits = 2 - math.floor(math.log10(value)) if value > 0 else 1
    return DurationColumn(unit, unit_s, min(max(1, digits), MAX_DURATION_DECIMALS))


def fmt_gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def fmt_metric(key: str, x: float) -> str:
    if key == "mfu":
        return f"{x * 100:.1f}%"
    if key == "tokens_per_s":
        return f"{x:,.0f}"
    if key.endswith("_s"):
        return fmt_seconds(x)
    return f"{x:.4g}"


def pair(value: Any) -> tuple[float, float] | None:
    """``[lo, hi]`` as two floats, or None when ``value`` is not such a pair."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return float(value[0]), float(value[1])
    return None


def card(key: str, value: str, sub: str = "", cls: str = "", test_id: str = "") -> str:
    tid = f' data-testid="{esc(test_id)}"' if test_id else ""
    c = f" {cls}" if cls else ""
    s = f'<div class="s">{esc(sub)}</div>' if sub else ""
    return f'<div class="card"{tid}><div class="k">{esc(key)}</div><div class="v{c}">{esc(value)}</div>{s}</div>'


def layout_line(rj: Mapping[str, Any]) -> str:
    p = rj.get("parallel", {})
    keys = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "num_micro_batches", "global_batch", "zero_stage",
            "schedule", "virtual_stages", "recompute", "sequence_parallel")
    return " · ".join(f"{k} {p[k]}" for k in keys if k in p)


def hardware_line(rj: Mapping[str, Any]) -> str:
    """``32 x dgx-a100 = 256 a100-sxm-80gb (nvlink3-nvswitch / ib-hdr)``; with node groups
    (``heterogeneous`` of `run --json`) every group, the GPUs of each pipeline stage and the split,
    as the readable report prints them (``cluster`` there holds only the first group's preset)."""
    c = rj.get("cluster", {})
    het = rj.get("heterogeneous")
    if isinstance(het, Mapping) and het.get("groups"):
        groups = " + ".join(f"{g.get('nodes', '?')} x {g.get('preset', '?')}" for g in het["groups"])
        text = f"{groups} = {rj.get('gpus', '?')} GPUs"
        if het.get("stage_gpus"):
            text += f"; stages on {', '.join(str(g) for g in het['stage_gpus'])}"
        if het.get("layers_per_stage"):
            text += f"; layers per stage {list(het['layers_per_stage'])}"
        return text
    return (f"{c.get('nodes', '?')} x {c.get('preset', '?')} = {rj.get('gpus', '?')} {c.get('gpu', '')} "
            f"({c.get('scale_up', '')} / {c.get('scale_out', '')})")


def report_header(rj: Mapping[str, Any]) -> str:
    m = rj.get("model", {})
    params = m.get("params")
    model = f"{m.get('name', '')} ({params / 1e9:.1f}B params)" if isinstance(params, (int, float)) else m.get("name", "")
    return (f"<h1>{esc(rj.get('name', 'clustersim report'))}</h1>"
            f"<p>{esc(model)} on {esc(hardware_line(rj))}</p>"
            f"<p>{esc(layout_line(rj))} · {esc(rj.get('dtype', ''))}"
            + (f" · {esc(rj['framework'])}" if rj.get("framework") else "")
            + f" · {esc(rj.get('engine', ''))} engine</p>")


def memory_verdict(mem: Mapping[str, Any]) -> str:
    """``memory.verdict`` of `run --json` (or of one stage), from ``fits`` where it has no verdict."""
    return str(mem.get("verdict") or ("fits" if mem.get("fits", True) else "does-not-fit"))


def job_runs(rj: Mapping[str, Any]) -> bool:
    """Whether the job can start: one that does not fit in memory has no step time, rate or MFU."""
    mem = rj.get("memory", {})
    return not isinstance(mem, Mapping) or memory_verdict(mem) != "does-not-fit"


def summary_cards(rj: Mapping[str, Any]) -> str:
    """Step time (with its interval when present), throughput, MFU, memory."""
    iv = rj.get("interval") if isinstance(rj.get("interval"), Mapping) else {}
    step = float(rj["step_time_s"])
    st = pair(iv.get("step_time_s")) if iv else None
    sub = f"{st[0]:.4g}-{st[1]:.4g} s ({iv.get('level', 0.8):.0%} interval)" if st else f"{rj.get('engine', '')} engine"
    mem = rj.get("memory", {})
    peak, cap = float(mem.get("peak_bytes_per_gpu", 0)), float(mem.get("capacity_bytes_per_gpu", 0))
    verdict = memory_verdict(mem)
    mem_cls = "bad" if verdict == "does-not-fit" else ""
    tps = pair(iv.get("tokens_per_s")) if iv else None
    mfu = pair(iv.get("mfu")) if iv else None
    if verdict == "does-not-fit":  # the job cannot start: no time, rate or MFU as if it had run
        why = "does not fit in GPU memory: it cannot run"
        cards = [card("step time", "none", why, "bad", test_id="step-time"),
                 card("tokens/s", "none", why, "bad", test_id="tokens-per-s"),
                 card("MFU", "none", why, "bad", test_id="mfu"),
                 card("peak memory per GPU", f"{fmt_gib(peak)} of {fmt_gib(cap)}", verdict, mem_cls, test_id="memory")]
        return f'<div class="cards">{"".join(cards)}</div>'
    cards = [
        card("step time", f"{step:.4g} s", sub, test_id="step-time"),
        card("tokens/s", f"{float(rj['tokens_per_s']):,.0f}", f"{tps[0]:,.0f}-{tps[1]:,.0f}" if tps else "",
             test_id="tokens-per-s"),
        card("MFU", f"{float(rj['mfu']) * 100:.1f}%", f"{mfu[0] * 100:.1f}-{mfu[1] * 100:.1f}%" if mfu else
             f"{float(rj.get('tflops_per_gpu', 0)):.1f} TFLOP/s per GPU", test_id="mfu"),
        card("peak memory per GPU", f"{fmt_gib(peak)} of {fmt_gib(cap)}", verdict, mem_cls, test_id="memory"),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def faults_note(rj: Mapping[str, Any]) -> str:
    """Per-rank mode's faults (``faults`` of `run --json`): which GPU paced the step and what it
    cost against a healthy cluster, as the readable report says it; empty without faults."""
    f = rj.get("faults")
    if not isinstance(f, Mapping) or "healthy_step_time_s" not in f:
        return ""
    text = ""
    paced = f.get("paced_by")
    if isinstance(paced, Mapping):
        where = ", ".join(f"{k} {paced[k]}" for k in ("node", "gpu", "pp", "dp") if k in paced)
        speed = f" at {float(paced['speed']):.2f}" if isinstance(paced.get("speed"), (int, float)) else ""
        text += f"paced by rank {paced.get('rank', '?')} ({where}): {paced.get('kind', '')}{speed}; "
    text += (f"cost {float(f.get('cost_s', 0)):+.4f} s ({float(f.get('cost_fraction', 0)) * 100:+.1f}%) against a "
             f"healthy cluster ({float(f['healthy_step_time_s']):.4f} s)")
    return f'<p class="note" data-testid="faults">{esc(text)}</p>'


def interval_html(rj: Mapping[str, Any]) -> str:
    """The prediction interval as lo / value / hi rows with a range bar, or a note when absent."""
    iv = rj.get("interval")
    if not isinstance(iv, Mapping):
        return '<p class="note" data-testid="no-interval">This build reports no prediction interval.</p>'
    level = iv.get("level", 0.8)
    rows = []
    for key, label, _ in INTERVAL_KEYS if job_runs(rj) else ():   # a job that cannot start has no time, rate or MFU
        lohi = pair(iv.get(key))
        if lohi is None or key not in rj:
            continue
        lo, hi = lohi
        value = float(rj[key])
        a, b = min(lo, value), max(hi, value)
        width = b - a if b > a else 1.0
        left = 100 * (lo - a) / width
        span = 100 * (hi - lo) / width
        mark = 100 * (value - a) / width
        bar = (f'<div class="range"><span style="left:{left:.1f}%;width:{max(span, 0.5):.1f}%"></span>'
               f'<i style="left:{mark:.1f}%"></i></div>')
        rows.append(f'<tr><td class="l">{esc(label)}</td><td>{esc(fmt_metric(key, lo))}</td>'
                    f'<td>{esc(fmt_metric(key, value))}</td><td>{esc(fmt_metric(key, hi))}</td><td>{bar}</td></tr>')
    mem = rj.get("memory", {})
    mem_iv = pair(mem.get("interval")) if isinstance(mem, Mapping) else None
    if mem_iv:
        rows.append(f'<tr><td class="l">peak memory</td><td>{esc(fmt_gib(mem_iv[0]))}</td>'
                    f'<td>{esc(fmt_gib(float(mem.get("peak_bytes_per_gpu", 0))))}</td>'
                    f'<td>{esc(fmt_gib(mem_iv[1]))}</td><td></td></tr>')
    if not rows:
        return '<p class="note" data-testid="no-interval">This build reports no prediction interval.</p>'
    return (f'<table class="t" data-testid="interval"><tr><th class="l">{level:.0%} interval</th><th>low</th>'
            f'<th>prediction</th><th>high</th><th></th></tr>{"".join(rows)}</table>{evidence_note(iv)}')


def evidence_note(iv: Mapping[str, Any]) -> str:
    """Where the interval comes from (``regime``, ``evidence_runs``, ``validated``, ``widened_for``
    of clustersim/uncertainty.py), as one line; empty when the interval does not say."""
    if "regime" not in iv:
        return ""
    text = f"regime {iv['regime']}"
    if isinstance(iv.get("evidence_runs"), int):
        text += f", {iv['evidence_runs']} measured reference runs"
    if iv.get("validated") is True:
        text += "; validated by measured runs"
    elif iv.get("validated") is False:
        widened = [str(w) for w in iv.get("widened_for") or []]
        text += "; NOT validated" + (f", widened for: {'; '.join(widened)}" if widened else "")
    return f'<p class="note" data-testid="interval-evidence">{esc(text)}</p>'


def breakdown_table(rj: Mapping[str, Any]) -> str:
    step = float(rj["step_time_s"])
    rows = "".join(f'<tr><td class="l">{esc(c)}</td><td>{s:.4f}</td><td>{100 * s / step if step else 0:.1f}%</td></tr>'
                   for c, s in rj.get("breakdown", {}).items())
    return f'<table class="t"><tr><th class="l">cause</th><th>seconds</th><th>share</th></tr>{rows}</table>'


MAX_STAGE_COLUMNS = 8  # past this, the table samples stages (the chart above shows every one)


def sampled_stages(count: int, verdict_stage: int, most: int = MAX_STAGE_COLUMNS + 1) -> list[int]:
    """The pipeline stages a table shows: all up to MAX_STAGE_COLUMNS (or ``most``), else the first,
    the last, the one the memory verdict comes from, and an even stride between them up to ``most``."""
    if count <= min(MAX_STAGE_COLUMNS, most):
        return list(range(count))
    keep = {0, count - 1, min(max(verdict_stage, 0), count - 1)}
    room = max(0, most - len(keep))
    if room:
        step = count / (room + 1)
        keep |= {int(round(step * (i + 1))) for i in range(room)}
    return sorted(keep)


MEMORY_ROWS = (("weights", "weights"), ("gradients", "gradients"), ("optimizer_states", "optimizer states"),
               ("activations", "activations"), ("transient", "transient buffers"), ("comm_buffers", "comm buffers"),
               ("workspace", "workspace"), ("fragmentation", "fragmentation"), ("cuda_context", "CUDA context"),
               ("nccl_buffers", "NCCL buffers"), ("host_bytes_per_gpu", "host (offloaded)"),
               ("allocated_peak_bytes", "allocated peak"), ("reserved_peak_bytes", "reserved peak"))


def memory_table(stages: Sequence[Mapping[str, Any]], verdict_stage: int | None = None) -> str:
    """Memory per GPU by part (rows) and pipeline stage (columns, sampled past eight), in GiB: the
    stages the command line samples (the first, the last, the one the verdict comes from,
    ``verdict_stage``, and a stride; it shows as many as its width allows), narrow enough for a
    page of 1,400 px. Without ``verdict_stage``, the stage of the highest peak."""
    if not stages:
        return ""
    worst = verdict_stage if verdict_stage is not None else \
        max(range(len(stages)), key=lambda i: (float(stages[i].get("peak_bytes_per_gpu", 0)), -i))
    shown = [stages[i] for i in sampled_stages(len(stages), worst)]
    head = "".join(f"<th>stage {esc(s.get('stage', i))}</th>" for i, s in enumerate(shown))
    body = []
    for key, label in MEMORY_ROWS:
        if not any(key in s for s in shown):
            continue
        cells = "".join(f"<td>{float(s.get(key, 0)) / GiB:.2f}</td>" for s in shown)
        body.append(f'<tr><td class="l">{esc(label)}</td>{cells}</tr>')
    ivs = [pair(s.get("interval")) for s in shown]
    if all(ivs):
        body.append('<tr><td class="l">80% interval</td>'
                    + "".join(f"<td>{lo / GiB:.1f}-{hi / GiB:.1f}</td>" for lo, hi in ivs) + "</tr>")  # type: ignore[misc]
    verdicts = [memory_verdict(s) for s in shown]
    bad = ' class="bad"'
    body.append('<tr><td class="l">verdict</td>' + "".join(
        f'<td{bad if v == "does-not-fit" else ""}>{esc(v)}</td>' for v in verdicts) + "</tr>")
    note = (f'<p class="note">{len(shown)} of {len(stages)} stages: the first, the last, the fullest and an even '
            "stride between (the chart shows every stage).</p>" if len(shown) < len(stages) else "")
    return (f'<table class="t" data-testid="memory-table"><tr><th class="l">GiB per GPU</th>{head}</tr>'
            f'{"".join(body)}</table>{note}')


def rows_table(columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]], test_id: str = "",
               left: Sequence[str] = ()) -> str:
    """A plain table: ``columns`` are (key, heading); values are formatted already or numbers.
    The first column and the columns named in ``left`` are left-aligned (text), the rest right."""
    tid = f' data-testid="{esc(test_id)}"' if test_id else ""
    cls = [' class="l"' if i == 0 or k in left else "" for i, (k, _) in enumerate(columns)]
    head = "".join(f"<th{c}>{esc(h)}</th>" for c, (_, h) in zip(cls, columns, strict=True))
    body = "".join("<tr>" + "".join(f"<td{c}>{esc(r.get(k, ''))}</td>" for c, (k, _) in zip(cls, columns, strict=True))
                   + "</tr>" for r in rows)
    return f'<table class="t"{tid}><tr>{head}</tr>{body}</table>'


# The energy block of `run --json` (clustersim/energy.py EnergyReport.to_json): label, unit, format.
ENERGY_ROWS: dict[str, tuple[str, str, str]] = {
    "gpu_power_w": ("power per GPU", "W", "sig4"), "node_power_w": ("power per node", "W", "sig4"),
    "it_power_kw": ("IT power, all nodes", "kW", "sig4"), "pue": ("PUE (facility / IT)", "", ".2f"),
    "facility_power_kw": ("facility power", "kW", "sig4"), "energy_per_step_kwh": ("energy per step", "kWh", ",.3g"),
    "energy_per_token_j": ("energy per token", "J", ",.3g"),
    "energy_per_trillion_tokens_mwh": ("energy per 1T tokens", "MWh", "sig4"),
    "load_fraction": ("power while training (share of TDP)", "", ".0%"),
    "training_tokens": ("training tokens", "", "tokens"), "training_run_mwh": ("energy of the training run", "MWh", "sig4"),
}


def sig4(x: float) -> str:
    """At most four significant digits, thousands separated: 15876.1 -> "15,880", 12.093 -> "12.09", 532.0 -> "532"."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = 3 - math.floor(math.log10(abs(x)))
    text = f"{round(x, decimals):,.{max(decimals, 0)}f}"
    return text.rstrip("0").rstrip(".") if decimals > 0 else text
_UNIT_SUFFIXES = (("_kwh", "kWh"), ("_mwh", "MWh"), ("_kw", "kW"), ("_w", "W"), ("_j", "J"), ("_s", "s"))


def _energy_row(key: str, value: Any) -> tuple[str, str, str]:
    label, unit, fmt = ENERGY_ROWS.get(key, ("", "", ",.4g"))
    if not label:  # a key added later: its words, its unit from the suffix, four digits
        stem = key
        for suffix, name in _UNIT_SUFFIXES:
            if key.endswith(suffix):
                stem, unit = key[: -len(suffix)], name
                break
        label = stem.replace("_", " ")
    def number(x: float) -> str:
        return fmt_tokens(x) if fmt == "tokens" else sig4(x) if fmt == "sig4" else format(x, fmt)

    lohi = pair(value)
    if lohi:
        return label, f"{number(lohi[0])} - {number(lohi[1])}", unit
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return label, str(value), unit
    return label, number(float(value)), unit


def energy_table(energy: Mapping[str, Any]) -> str:
    """The energy block as quantity, value, unit: words for the keys, rounded numbers."""
    rows = "".join(f'<tr><td class="l">{esc(label)}</td><td>{esc(value)}</td><td class="l">{esc(unit)}</td></tr>'
                   for label, value, unit in (_energy_row(k, v) for k, v in energy.items()
                                              if not isinstance(v, Mapping)))
    return f'<table class="t" data-testid="energy">{rows}</table>'


def legend_html(items: Sequence[tuple[str, str]], test_id: str = "") -> str:
    """A chart legend as HTML: one colour swatch and label per (label, colour)."""
    tid = f' data-testid="{esc(test_id)}"' if test_id else ""
    entries = "".join(f'<li><span class="swatch" style="background:{esc(color)}"></span>{esc(label)}</li>'
                      for label, color in items)
    return f'<ul class="legend"{tid}>{entries}</ul>'


def mapping_table(data: Mapping[str, Any], test_id: str = "") -> str:
    """A two-column table of a JSON object's scalar entries (nested objects flattened with dots),
    for report sections whose keys other parts of clustersim define (``energy``)."""
    rows: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        prefix, node = stack.pop(0)
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                stack.append((f"{key}.", v))
            elif isinstance(v, bool) or v is None or isinstance(v, str):
                rows.append((key, str(v)))
            elif isinstance(v, (int, float)):
                rows.append((key, f"{v:,.6g}"))
            elif pair(v):
                lo, hi = pair(v)  # type: ignore[misc]
                rows.append((key, f"{lo:,.6g} - {hi:,.6g}"))
    tid = f' data-testid="{esc(test_id)}"' if test_id else ""
    body = "".join(f'<tr><td class="l">{esc(k)}</td><td>{esc(v)}</td></tr>' for k, v in rows)
    return f'<table class="t"{tid}>{body}</table>'
