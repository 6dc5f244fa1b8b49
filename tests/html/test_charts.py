"""Chart JSON items: deterministic ids, and data injected exactly as Bokeh serialises it."""

from __future__ import annotations

import json

from clustersim.engine.timeline import Segment
from clustersim.html import charts
from clustersim.html.timeline_data import timeline_data


def _timeline() -> dict:
    segs = [Segment(r, "compute", f"0F{i}", "compute", i * 0.1, i * 0.1 + 0.05) for r in range(2) for i in range(5)]
    return charts.timeline_chart(timeline_data(segs, 0.5))


def test_same_chart_twice_in_one_process_is_identical_json() -> None:
    # Bokeh's own ids come from a process-wide counter; the canonical ones do not.
    a, b = json.dumps(_timeline()), json.dumps(_timeline())
    assert a == b
    assert '"id": "c1"' in a and '"p1' not in a


def test_injected_columns_match_bokehs_own_serialisation() -> None:
    from bokeh.embed import json_item
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure

    cols = {"x": [0.0, 1.5, 3.25], "y": [1, 2, 3], "label": ["a", "b", "c"]}

    def item(inject: bool) -> str:
        fig = figure()
        if inject:
            src = charts.empty_source(cols)
            fig.scatter("x", "y", source=src)
            return json.dumps(charts.chart_item(fig, {src: cols}))
        fig.scatter("x", "y", source=ColumnDataSource(cols))
        return json.dumps(charts.canonical_item(json_item(fig)))

    # The page embeds the JSON text, so the text is what must agree.
    assert item(inject=True) == item(inject=False)
    assert '["label", ["a", "b", "c"]]' in item(inject=True)


def test_canonical_ids_follow_first_appearance_and_keep_references() -> None:
    item = {"root_id": "p9", "doc": {"roots": [{"id": "p9", "attributes": {"x": {"id": "p3"}, "y": {"id": "p9"}}}]}}
    assert charts.canonical_item(item) == {
        "root_id": "c1", "doc": {"roots": [{"id": "c1", "attributes": {"x": {"id": "c2"}, "y": {"id": "c1"}}}]}}
