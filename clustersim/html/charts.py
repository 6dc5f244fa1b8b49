"""Bokeh charts of a report, as JSON items that BokehJS embeds (``Bokeh.embed.embed_item``).

Every chart is built in Python with ``bokeh.plotting`` and serialised with ``bokeh.embed.json_item``;
``canonical_item`` then renumbers Bokeh's model ids in order of appearance, so that the same
report gives byte-identical JSON in any process (Bokeh's own ids come from a process-wide
counter). Pure functions: data in, JSON-ready dicts out; no I/O.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clustersim.engine.timeline import CAUSES
from clustersim.html.timeline_data import TimelineData
from clustersim.units import GiB

# Colours per critical-path cause: D3's schemeCategory10 (d3-scale-chromatic, categorical/category10.js),
# bubble in light grey so that idle time reads as empty; host from schemeCategory20 (category10 has ten).
CAUSE_COLORS = {
    "compute": "#1f77b4", "tp_comm": "#ff7f0e", "cp_comm": "#17becf", "ep_comm": "#8c564b",
    "pp_comm": "#2ca02c", "dp_comm": "#d62728", "bubble": "#c7c7c7", "optimizer": "#9467bd",
    "straggler": "#e377c2", "jitter": "#bcbd22", "host": "#ffbb78",
}
_OTHER = "#7f7f7f"
# Memory parts, bottom to top (clustersim.memory.report.MemoryReport fields); colours as above.
MEMORY_PARTS = ("weights", "gradients", "optimizer_states", "activations", "transient", "comm_buffers", "workspace",
                "fragmentation", "cuda_context", "nccl_buffers")   # clustersim.memory.report.PARTS
MEMORY_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf")  # schemeCategory10, all ten
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


# ---------------------------------------------------------------------------------------------
# Charts that the web app redraws after every change are built from templates: the figure is
# built and serialised once per shape (its kind and the few things that change its structure),
# with empty data sources; each call copies that JSON and fills in the data and the handful of
# attributes that vary (title, ranges, height), found by the models' ``name``. Bokeh's model
# building and serialisation take about 0.2 s per figure; the copy takes milliseconds.

_TEMPLATES: dict[tuple[Any, ...], str] = {}
_TEMPLATE_LOCK = threading.Lock()


def _template(key: tuple[Any, ...], build: Callable[[], Any]) -> dict[str, Any]:
    text = _TEMPLATES.get(key)
    if text is None:
        with _TEMPLATE_LOCK:  # Bokeh's documents are not meant to be built from two threads at once
            text = _TEMPLATES.get(key)
            if text is None:
                text = json.dumps(chart_item(build()))
                _TEMPLATES[key] = text
    return json.loads(text)


def _fill(item: dict[str, Any], data: Mapping[str, Mapping[str, Sequence[Any]]],
          attrs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Set the columns of the data sources and the attributes of the models named in ``data`` and
    ``attrs`` (every name must be found: a template that lost one is a bug)."""
    found: set[str] = set()
    stack: list[Any] = [item]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            a = cur.get("attributes")
            name = a.get("name") if isinstance(a, dict) else None
            if name in data:
                a["data"] = {"type": "map", "entries": [[k, list(v)] for k, v in data[name].items()]}
                found.add(name)
                continue  # nothing to patch inside a data source
            if name in attrs:
                a.update(attrs[name])
                found.add(name)
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    missing = (set(data) | set(attrs)) - found
    if missing:
        raise RuntimeError(f"chart template lacks the models {sorted(missing)}")
    return item


TIMELINE_COLUMNS = ("lane", "left", "right", "cause", "name", "dur", "detail", "alpha")


def timeline_chart(data: TimelineData, title: str = "simulated step") -> dict[str, Any]:
    """One lane per pipeline stage and stream, zoomable along time (like the Perfetto trace)."""
    cols: dict[str, list[Any]] = {k: [] for k in TIMELINE_COLUMNS}
    for b in data.blocks:
        span = b.end_s - b.start_s
        cols["lane"].append(data.lanes[b.lane])
        cols["left"].append(_r(b.start_s * 1e3))
        cols["right"].append(_r(b.end_s * 1e3))
        cols["cause"].append(b.cause)
        cols["name"].append(b.name)
        cols["dur"].append(_r(span * 1e3))
        cols["detail"].append(", ".join(f"{c} {s * 1e3:.3f} ms" for c, s in b.by_cause) if b.segments > 1 else "")
        busy = 1.0 if b.segments == 1 or span <= 0 else min(1.0, b.busy_s / span)
        cols["alpha"].append(_r(0.35 + 0.65 * busy, 3))
    item = _template(("timeline",), _timeline_figure)
    height = min(900, 120 + 22 * len(data.lanes))
    return _fill(item, {"blocks": cols}, {"figure": {"height": height}, "title": {"text": title},
                                          "lanes": {"factors": list(reversed(data.lanes))}})


def timeline_causes(data: TimelineData) -> tuple[str, ...]:
    """The causes the timeline draws, in the order of the legend (clustersim.engine.timeline.CAUSES)."""
    seen = {b.cause for b in data.blocks}
    return tuple(c for c in CAUSES if c in seen)


def cause_color(cause: str) -> str:
    return CAUSE_COLORS.get(cause, _OTHER)


def _timeline_figure() -> Any:
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.transform import factor_cmap

    fig = _figure(y_range=FactorRange(factors=["lane"], name="lanes"), height=300, title="timeline",
                  tools=TOOLS_X, active_scroll="xwheel_zoom", x_axis_label="time in the step (ms)", name="figure")
    fig.title.name = "title"
    causes = [*CAUSES, "other"]
    color = factor_cmap("cause", [CAUSE_COLORS.get(c, _OTHER) for c in causes], causes)
    source = ColumnDataSource({k: [] for k in TIMELINE_COLUMNS}, name="blocks")
    bars = fig.hbar(y="lane", left="left", right="right", height=0.8, source=source, fill_color=color,
                    line_color=None, fill_alpha="alpha")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[("", "@name"), ("lane", "@lane"), ("cause", "@cause"),
                                                       ("start", "@left{0.000} ms"), ("duration", "@dur{0.000} ms"),
                                                       ("inside", "@detail")]))
    # The legend is HTML under the chart (clustersim.html.fragments.legend_html): a Bokeh legend
    # needs a renderer per entry, and the empty ones it had drew their swatches with zero height.
    fig.ygrid.grid_line_color = None
    return fig


def breakdown_chart(breakdown: Mapping[str, float], step_time_s: float) -> dict[str, Any]:
    """Seconds of the critical path by cause (the report's breakdown)."""
    causes = tuple(breakdown)
    seconds = [_r(breakdown[c], 9) for c in causes]
    share = [_r(100 * s / step_time_s, 3) if step_time_s > 0 else 0.0 for s in seconds]
    item = _template(("breakdown", causes), lambda: _breakdown_figure(causes))
    return _fill(item, {"causes": {"cause": list(causes), "seconds": seconds, "share": share,
                                   "color": [CAUSE_COLORS.get(c, _OTHER) for c in causes]}},
                 {"title": {"text": f"critical path: {step_time_s:.4g} s by cause"}})


def _breakdown_figure(causes: tuple[str, ...]) -> Any:
    from bokeh.models import ColumnDataSource, HoverTool

    source = ColumnDataSource({"cause": [], "seconds": [], "share": [], "color": []}, name="causes")
    fig = _figure(y_range=list(reversed(causes)), height=60 + 26 * len(causes), tools="save", title="breakdown",
                  x_axis_label="seconds")
    fig.title.name = "title"
    bars = fig.hbar(y="cause", right="seconds", height=0.7, source=source, fill_color="color", line_color=None)
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[("cause", "@cause"), ("seconds", "@seconds{0.0000}"),
                                                       ("share", "@share{0.0}%")]))
    fig.ygrid.grid_line_color = None
    fig.x_range.start = 0
    return fig


def memory_chart(stages: Sequence[Mapping[str, Any]], capacity_bytes: float) -> dict[str, Any]:
    """Peak memory per GPU of every pipeline stage, by part, against the GPU's capacity."""
    labels = [f"stage {i}" for i in range(len(stages))]
    parts = tuple(p for p in MEMORY_PARTS if any(p in s for s in stages))
    data: dict[str, list[Any]] = {"stage": labels}
    for p in parts:
        data[p] = [_r(float(s.get(p, 0)) / GiB, 4) for s in stages]
    data["peak"] = [_r(float(s["peak_bytes_per_gpu"]) / GiB, 4) for s in stages]
    data["fits"] = ["fits" if s.get("fits", True) else "does not fit" for s in stages]
    cap = capacity_bytes / GiB
    top = max([cap, *data["peak"]]) * 1.08
    item = _template(("memory", parts, len(labels) > 16), lambda: _memory_figure(parts, len(labels) > 16))
    return _fill(item, {"stages": data}, {
        "title": {"text": f"peak memory per GPU by pipeline stage (capacity {cap:.1f} GiB)"},
        "stage_range": {"factors": labels}, "value_range": {"start": 0, "end": _r(top, 3)},
        "capacity": {"location": _r(cap, 4)}})


def _memory_figure(parts: tuple[str, ...], many: bool) -> Any:
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d, Span

    source = ColumnDataSource({k: [] for k in ("stage", *parts, "peak", "fits")}, name="stages")
    fig = _figure(x_range=FactorRange(factors=["stage 0"], name="stage_range"),
                  y_range=Range1d(0, 1, name="value_range"), height=320, tools="save",
                  y_axis_label="GiB per GPU", title="memory")
    fig.title.name = "title"
    renderers = fig.vbar_stack(list(parts), x="stage", width=0.7, source=source, line_color=None,
                               color=list(MEMORY_COLORS[: len(parts)]), legend_label=list(parts))
    fig.add_layout(Span(location=1.0, dimension="width", line_color="black", line_dash="dashed", line_width=2,
                        name="capacity"))
    tips = [("stage", "@stage"), ("peak", "@peak{0.00} GiB"), ("verdict", "@fits")]
    tips += [(p, f"@{p}{{0.00}} GiB") for p in parts]
    fig.add_tools(HoverTool(renderers=renderers[-1:], tooltips=tips))
    legend = fig.legend[0]
    fig.center.remove(legend)  # below the plot, not over the bars
    legend.orientation = "horizontal"
    legend.label_text_font_size = "11px"
    fig.add_layout(legend, "below")
    fig.xgrid.grid_line_color = None
    if many:
        fig.xaxis.major_label_orientation = math.pi / 3
    return fig


def pareto_chart(points: Mapping[str, Sequence[Any]], front: Mapping[str, Sequence[Any]],
                 top: Mapping[str, Sequence[Any]], capacity_bytes: float, title: str) -> dict[str, Any]:
    """Step time against peak memory per GPU for the layouts with a time; the Pareto front as a
    line, the top layouts as stars, colour = GPUs per model replica (tp x pp x cp).

    Each mapping holds equal-length columns: ``peak_gib``, ``step_s``, ``label``, ``tokens_per_s``,
    ``mfu``, ``replica_gpus``, ``engine``.
    """
    from bokeh.models import ColorBar, ColumnDataSource, FixedTicker, HoverTool, LogColorMapper, Span
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
    # the axis reaches the capacity line (an automatic range follows the points only, and the
    # layouts that fit all lie left of it)
    peaks = [float(v) for col in (points, front, top) for v in col.get("peak_gib", [])]
    fig.x_range.start = 0
    fig.x_range.end = _r(max([*peaks, capacity_bytes / GiB]) * 1.05, 6)
    fig.add_tools(HoverTool(renderers=[dots, marks, stars], tooltips=tips))
    # ticks at the replica sizes the points have (a log scale's own ticks read 1.1, 1.2, ... GPUs)
    sizes = sorted(set(replica))
    ticker = FixedTicker(ticks=sizes) if len(sizes) <= 12 else None
    fig.add_layout(ColorBar(color_mapper=mapper, title="GPUs per replica", width=10,
                            **({"ticker": ticker} if ticker is not None else {})), "right")
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
    # The range reaches the longest whisker: a Whisker is an annotation, which Bokeh's automatic
    # range ignores, so it was cut off at the right edge. 5% beyond, like the range's own padding.
    ends = [*data["value"], *data.get("hi", [])]
    fig.x_range.end = _r(max([*ends, 0.0]) * 1.05, 6) or 1.0
    fig.xaxis.formatter = NumeralTickFormatter(format="0,0.[00]")
    fig.ygrid.grid_line_color = None
    return chart_item(fig)
