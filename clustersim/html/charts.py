"""Bokeh charts of a report, as JSON items that BokehJS embeds (``Bokeh.embed.embed_item``).

Every chart is built in Python with ``bokeh.plotting`` and serialised with ``bokeh.embed.json_item``;
``canonical_item`` then renumbers Bokeh's model ids in order of appearance, so that the same
report gives byte-identical JSON in any process (Bokeh's own ids come from a process-wide
counter). Pure functions: data in, JSON-ready dicts out; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.engine.timeline import CAUSES
from clustersim.html.timeline_data import TimelineData
from clustersim.units import GiB

# Colours per critical-path cause: D3's schemeCategory10 (d3-scale-chromatic, categorical/category10.js),
# bubble in light grey so that idle time reads as empty.
CAUSE_COLORS = {
    "compute": "#1f77b4", "tp_comm": "#ff7f0e", "cp_comm": "#17becf", "ep_comm": "#8c564b",
    "pp_comm": "#2ca02c", "dp_comm": "#d62728", "bubble": "#c7c7c7", "optimizer": "#9467bd",
}
_OTHER = "#7f7f7f"
# Memory parts, bottom to top (clustersim.memory.report.MemoryReport fields); colours as above.
MEMORY_PARTS = ("weights", "gradients", "optimizer_states", "activations", "comm_buffers", "workspace")
MEMORY_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
TOOLS_X = "xpan,xwheel_zoom,xbox_zoom,reset,save"


def _figure(**kwargs: Any) -> Any:
    from bokeh.plotting import figure

    kwargs.setdefault("sizing_mode", "stretch_width")
    kwargs.setdefault("toolbar_location", "above")
    fig = figure(**kwargs)
    fig.title.text_font_size = "13px"
    return fig


def canonical_item(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with Bokeh's model ids renumbered ``c1, c2, ...`` in order of appearance."""
    mapping: dict[str, str] = {}

    def rename(value: str) -> str:
        if value not in mapping:
            mapping[value] = f"c{len(mapping) + 1}"
        return mapping[value]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k in ("id", "root_id") and isinstance(v, str):
                    out[k] = rename(v)
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(item)


def chart_item(fig: Any, data: Mapping[Any, Mapping[str, Sequence[Any]]] | None = None) -> dict[str, Any]:
    """``fig`` as a JSON item; ``data`` maps each ColumnDataSource of ``fig`` (built with empty
    columns) to its columns, which go into the item as plain JSON lists, in the form Bokeh's own
    serialiser gives lists (``{"type": "map", "entries": [[name, [...]], ...]}``) but without its
    per-element encoding (seconds for 10,000s of values; tests/html/test_charts.py checks that
    both forms are the same)."""
    from bokeh.embed import json_item

    item = json_item(fig)
    if data:
        by_id = {src.id: cols for src, cols in data.items()}
        _inject(item, by_id)
    return canonical_item(item)


def _inject(node: Any, by_id: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if cur.get("name") == "ColumnDataSource" and cur.get("id") in by_id:
                cols = by_id[cur["id"]]
                cur["attributes"]["data"] = {"type": "map", "entries": [[k, list(v)] for k, v in cols.items()]}
                continue
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)


def empty_source(cols: Mapping[str, Sequence[Any]]) -> Any:
    """A ColumnDataSource with ``cols``' names and no rows (``chart_item`` fills it in)."""
    from bokeh.models import ColumnDataSource

    return ColumnDataSource({k: [] for k in cols})


def _r(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


def timeline_chart(data: TimelineData, title: str = "simulated step") -> dict[str, Any]:
    """One lane per pipeline stage and stream, zoomable along time (like the Perfetto trace)."""
    from bokeh.models import FactorRange, HoverTool, Legend, LegendItem

    cols: dict[str, list[Any]] = {k: [] for k in ("lane", "left", "right", "cause", "name", "dur", "detail",
                                                  "color", "alpha")}
    for b in data.blocks:
        span = b.end_s - b.start_s
        cols["lane"].append(data.lanes[b.lane])
        cols["left"].append(_r(b.start_s * 1e3))
        cols["right"].append(_r(b.end_s * 1e3))
        cols["cause"].append(b.cause)
        cols["name"].append(b.name)
        cols["dur"].append(_r(span * 1e3))
        cols["detail"].append(", ".join(f"{c} {s * 1e3:.3f} ms" for c, s in b.by_cause) if b.segments > 1 else "")
        cols["color"].append(CAUSE_COLORS.get(b.cause, _OTHER))
        busy = 1.0 if b.segments == 1 or span <= 0 else min(1.0, b.busy_s / span)
        cols["alpha"].append(_r(0.35 + 0.65 * busy, 3))
    height = min(900, 60 + 22 * len(data.lanes) + 60)
    fig = _figure(y_range=FactorRange(factors=list(reversed(data.lanes))), height=height, title=title,
                  tools=TOOLS_X, active_scroll="xwheel_zoom", x_axis_label="time in the step (ms)")
    source = empty_source(cols)
    bars = fig.hbar(y="lane", left="left", right="right", height=0.8, source=source, fill_color="color",
                    line_color=None, fill_alpha="alpha")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[("", "@name"), ("lane", "@lane"), ("cause", "@cause"),
                                                       ("start", "@left{0.000} ms"), ("duration", "@dur{0.000} ms"),
                                                       ("inside", "@detail")]))
    # A legend of the causes present, from invisible one-point renderers (legend_field would group
    # the 10,000s of bars client-side).
    present = [c for c in CAUSES if c in set(cols["cause"])]
    items = []
    for cause in present:
        r = fig.hbar(y=[data.lanes[0]], left=[0.0], right=[0.0], height=0.0, fill_color=CAUSE_COLORS[cause],
                     line_color=None)
        items.append(LegendItem(label=cause, renderers=[r]))
    if items:
        fig.add_layout(Legend(items=items, orientation="horizontal", click_policy="none"), "below")
    fig.ygrid.grid_line_color = None
    return chart_item(fig, {source: cols})


def breakdown_chart(breakdown: Mapping[str, float], step_time_s: float) -> dict[str, Any]:
    """Seconds of the critical path by cause (the report's breakdown), largest share visible first."""
    from bokeh.models import ColumnDataSource, HoverTool

    causes = [c for c in breakdown]
    seconds = [_r(breakdown[c], 9) for c in causes]
    share = [_r(100 * s / step_time_s, 3) if step_time_s > 0 else 0.0 for s in seconds]
    source = ColumnDataSource({"cause": causes, "seconds": seconds, "share": share,
                               "color": [CAUSE_COLORS.get(c, _OTHER) for c in causes]})
    fig = _figure(y_range=list(reversed(causes)), height=60 + 26 * len(causes), tools="save",
                  title=f"critical path: {step_time_s:.4g} s by cause", x_axis_label="seconds")
    bars = fig.hbar(y="cause", right="seconds", height=0.7, source=source, fill_color="color", line_color=None)
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[("cause", "@cause"), ("seconds", "@seconds{0.0000}"),
                                                       ("share", "@share{0.0}%")]))
    fig.ygrid.grid_line_color = None
    fig.x_range.start = 0
    return chart_item(fig)


def memory_chart(stages: Sequence[Mapping[str, Any]], capacity_bytes: float) -> dict[str, Any]:
    """Peak memory per GPU of every pipeline stage, by part, against the GPU's capacity."""
    from bokeh.models import ColumnDataSource, HoverTool, Span

    labels = [f"stage {i}" for i in range(len(stages))]
    parts = [p for p in MEMORY_PARTS if any(p in s for s in stages)]
    data: dict[str, list[Any]] = {"stage": labels}
    for p in parts:
        data[p] = [_r(float(s.get(p, 0)) / GiB, 4) for s in stages]
    data["peak"] = [_r(float(s["peak_bytes_per_gpu"]) / GiB, 4) for s in stages]
    data["fits"] = ["fits" if s.get("fits", True) else "does not fit" for s in stages]
    source = ColumnDataSource(data)
    cap = capacity_bytes / GiB
    top = max([cap, *data["peak"]]) * 1.08
    fig = _figure(x_range=labels, height=320, tools="save", y_axis_label="GiB per GPU",
                  title=f"peak memory per GPU by pipeline stage (capacity {cap:.1f} GiB)")
    renderers = fig.vbar_stack(parts, x="stage", width=0.7, source=source, line_color=None,
                               color=list(MEMORY_COLORS[: len(parts)]), legend_label=list(parts))
    fig.add_layout(Span(location=cap, dimension="width", line_color="black", line_dash="dashed", line_width=2))
    fig.y_range.start = 0
    fig.y_range.end = top
    tips = [("stage", "@stage"), ("peak", "@peak{0.00} GiB"), ("verdict", "@fits")]
    tips += [(p, f"@{p}{{0.00}} GiB") for p in parts]
    fig.add_tools(HoverTool(renderers=renderers[-1:], tooltips=tips))
    legend = fig.legend[0]
    fig.center.remove(legend)  # below the plot, not over the bars
    legend.orientation = "horizontal"
    legend.label_text_font_size = "11px"
    fig.add_layout(legend, "below")
    fig.xgrid.grid_line_color = None
    if len(labels) > 16:
        fig.xaxis.major_label_orientation = math.pi / 3
    return chart_item(fig)


def pareto_chart(points: Mapping[str, Sequence[Any]], front: Mapping[str, Sequence[Any]],
                 top: Mapping[str, Sequence[Any]], capacity_bytes: float, title: str) -> dict[str, Any]:
    """Step time against peak memory per GPU for the layouts with a time; the Pareto front as a
    line, the top layouts as stars, colour = GPUs per model replica (tp x pp x cp).

    Each mapping holds equal-length columns: ``peak_gib``, ``step_s``, ``label``, ``tokens_per_s``,
    ``mfu``, ``replica_gpus``, ``engine``.
    """
    from bokeh.models import ColorBar, ColumnDataSource, HoverTool, LogColorMapper, Span
    from bokeh.palettes import Viridis256

    tips = [("layout", "@label"), ("step time", "@step_s{0.000} s"), ("peak memory", "@peak_gib{0.0} GiB"),
            ("tokens/s", "@tokens_per_s{0,0}"), ("MFU", "@mfu{0.0%}"), ("GPUs per replica", "@replica_gpus"),
            ("engine", "@engine")]
    fig = _figure(height=420, title=title, tools="pan,wheel_zoom,box_zoom,reset,save",
                  x_axis_label="peak memory per GPU (GiB)", y_axis_label="step time (s)")
    replica = [float(v) for v in points["replica_gpus"]] or [1.0]
    mapper = LogColorMapper(palette=Viridis256, low=min(replica), high=max(max(replica), min(replica) * 2))
    dot_source = empty_source(points)
    dots = fig.scatter("peak_gib", "step_s", source=dot_source, size=5, alpha=0.6,
                       color={"field": "replica_gpus", "transform": mapper}, legend_label="layouts (closed form)")
    fig.line("peak_gib", "step_s", source=ColumnDataSource(dict(front)), color="#d62728", line_width=2,
                    legend_label="Pareto front")
    marks = fig.scatter("peak_gib", "step_s", source=ColumnDataSource(dict(front)), size=8, color="#d62728")
    stars = fig.scatter("peak_gib", "step_s", source=ColumnDataSource(dict(top)), marker="star", size=14,
                        color="black", legend_label="top layouts")
    fig.add_layout(Span(location=capacity_bytes / GiB, dimension="height", line_color="grey", line_dash="dashed"))
    fig.add_tools(HoverTool(renderers=[dots, marks, stars], tooltips=tips))
    fig.add_layout(ColorBar(color_mapper=mapper, title="GPUs per replica", width=10), "right")
    fig.legend.location = "top_right"
    return chart_item(fig, {dot_source: points})


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str, unit: str,
              lo: Sequence[float | None] | None = None, hi: Sequence[float | None] | None = None,
              color: str = "#1f77b4") -> dict[str, Any]:
    """One bar per row (horizontal), with a whisker from ``lo`` to ``hi`` where both are given."""
    from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter, Whisker

    data: dict[str, list[Any]] = {"label": list(labels), "value": [_r(v, 6) for v in values]}
    have_range = lo is not None and hi is not None and any(a is not None and b is not None for a, b in zip(lo, hi, strict=True))
    if have_range:
        assert lo is not None and hi is not None
        data["lo"] = [_r(a if a is not None else v, 6) for a, v in zip(lo, values, strict=True)]
        data["hi"] = [_r(b if b is not None else v, 6) for b, v in zip(hi, values, strict=True)]
    source = ColumnDataSource(data)
    fig = _figure(y_range=list(reversed(list(labels))), height=70 + 30 * len(labels), tools="save", title=title,
                  x_axis_label=unit)
    bars = fig.hbar(y="label", right="value", height=0.6, source=source, fill_color=color, line_color=None)
    tips = [("", "@label"), (unit, "@value{0,0.00}")]
    if have_range:
        fig.add_layout(Whisker(source=source, base="label", lower="lo", upper="hi", dimension="width",
                               line_color="black"))
        tips.append(("80% interval", "@lo{0,0.00} - @hi{0,0.00}"))
    fig.add_tools(HoverTool(renderers=[bars], tooltips=tips))
    fig.x_range.start = 0
    fig.xaxis.formatter = NumeralTickFormatter(format="0,0.[00]")
    fig.ygrid.grid_line_color = None
    return chart_item(fig)
