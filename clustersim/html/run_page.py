"""`clustersim run --html FILE`: one step of one scenario as a page.

Sections: the key numbers (with the prediction interval when the report carries one), the
simulated step as a timeline (event engine only), the critical-path breakdown, memory per
pipeline stage against the GPU's capacity, and the scenario itself as YAML. The web app
(clustersim/serve) renders the same pieces from the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.engine.timeline import Timeline
from clustersim.html import charts, fragments
from clustersim.html.page import esc, render_page, scenario_yaml
from clustersim.html.timeline_data import MAX_BLOCKS, TimelineData, timeline_data
from clustersim.report import StepReport


def stage_memory(report: StepReport) -> list[dict[str, Any]]:
    return [dict(m.to_json()) for m in report.memory_by_stage]


def timeline_note(data: TimelineData | None, engine: str) -> str:
    if data is None:
        return ("The closed form (--engine analytical) records no timeline; run the event engine "
                "(the default) to see one.") if engine == "analytical" else "No timeline was recorded."
    if data.resolution_s == 0.0:
        return (f"Every one of the {data.raw_segments:,} segments of the event engine's timeline is drawn. "
                "Scroll to zoom in time, drag to pan, hover for details.")
    return (f"{data.raw_segments:,} segments drawn as {len(data.blocks):,} blocks: segments shorter than "
            f"{data.resolution_s * 1e3:.4g} ms that follow each other on a lane are merged (at most "
            f"{MAX_BLOCKS:,} blocks); a merged block takes the colour of its main cause, is paler the more idle "
            "time it holds, and lists its seconds by cause on hover. Scroll to zoom, drag to pan.")


def run_charts(rj: Mapping[str, Any], stages: Sequence[Mapping[str, Any]],
               tdata: TimelineData | None) -> dict[str, Any]:
    """Chart JSON items by the id of the <div> they go into."""
    out: dict[str, Any] = {}
    cap = float(rj["memory"]["capacity_bytes_per_gpu"])
    if not fragments.job_runs(rj):
        out["chart-memory"] = charts.memory_chart(stages, cap)
        return out
    if tdata is not None and tdata.blocks:
        pp = rj.get("parallel", {}).get("pp", "?")
        out["chart-timeline"] = charts.timeline_chart(
            tdata, f"simulated step: {pp} pipeline stages, one lane per stage and stream")
    out["chart-breakdown"] = charts.breakdown_chart(rj["breakdown"], float(rj["step_time_s"]))
    out["chart-memory"] = charts.memory_chart(stages, cap)
    return out


def run_sections(rj: Mapping[str, Any], stages: Sequence[Mapping[str, Any]], tdata: TimelineData | None,
                 scenario: Mapping[str, Any] | None) -> dict[str, str]:
    """The HTML of each section, by name (the web app swaps them in one by one)."""
    engine = str(rj.get("engine", ""))
    timeline = ""
    if tdata is not None and tdata.blocks:
        legend = [(c, charts.cause_color(c)) for c in charts.timeline_causes(tdata)]
        timeline = ('<div id="chart-timeline" class="chart"></div>'
                    + fragments.legend_html(legend, test_id="timeline-legend"))
    sections = {
        "summary": fragments.summary_cards(rj) + fragments.faults_note(rj),
        "interval": fragments.interval_html(rj),
        "timeline": f'{timeline}<p class="note" data-testid="timeline-note">{esc(timeline_note(tdata, engine))}</p>',
        "breakdown": '<div id="chart-breakdown" class="chart"></div>' + fragments.breakdown_table(rj),
        "memory": '<div id="chart-memory" class="chart"></div>' + fragments.memory_table(stages, rj["memory"].get("stage")),
    }
    if isinstance(rj.get("energy"), Mapping):  # `energy` of `run --json` (docs/output.md)
        sections["energy"] = fragments.energy_table(rj["energy"])
    if not fragments.job_runs(rj):   # no step: no timeline, critical path or energy per step as if it had run
        why = '<p class="note" data-testid="does-not-fit">Not shown: the job does not fit in GPU memory, so it cannot run.</p>'
        for name in ("timeline", "breakdown", "energy"):
            if name in sections:
                sections[name] = why
    if scenario is not None:
        sections["scenario"] = f'<pre class="yaml" data-testid="scenario-yaml">{esc(scenario_yaml(scenario))}</pre>'
    return sections


SECTION_TITLES = {"summary": "Prediction", "interval": "Prediction interval", "timeline": "Timeline of the step",
                  "breakdown": "Critical path by cause", "memory": "Memory per pipeline stage",
                  "energy": "Energy", "scenario": "Scenario"}


def sections_html(sections: Mapping[str, str]) -> str:
    return "".join(f'<section id="sec-{name}"><h2>{esc(SECTION_TITLES.get(name, name))}</h2>{body}</section>'
                   for name, body in sections.items())


def run_page(report: StepReport, timeline: Timeline | None = None, scenario: Mapping[str, Any] | None = None,
             tokens: float | None = None) -> str:
    """The whole page of one run (``timeline``: the event engine's, recorded; None for the closed form;
    ``tokens``: `run --tokens`, the whole run's energy)."""
    rj = report.to_json(tokens)
    stages = stage_memory(report)
    tdata = (timeline_data(timeline.segments, report.step_time_s, pp=report.scenario.parallel.pp)
             if timeline is not None and timeline.record else None)
    body = sections_html(run_sections(rj, stages, tdata, scenario))
    return render_page(f"clustersim: {rj['name']}", fragments.report_header(rj), body, run_charts(rj, stages, tdata))
