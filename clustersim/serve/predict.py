"""The web app's answers, as plain functions of validated requests (no HTTP here).

``predict`` runs the closed form (``api.estimate``) or the event engine on the request's
scenario and returns what the page shows: the report's JSON, the HTML of each section and the
chart items, rendered by the same functions as `clustersim run --html`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from clustersim.api import estimate, simulate_with_timeline
from clustersim.errors import InputError
from clustersim.html.page import scenario_yaml
from clustersim.html.run_page import run_charts, run_page, run_sections, stage_memory
from clustersim.html.timeline_data import timeline_data
from clustersim.inputs import MAX_YAML_BYTES, load_yaml
from clustersim.scenario import DEFAULT_SCENARIO_YAML, Scenario, scenario_from_dict
from clustersim.serve import requests as rq

# A request must not be able to occupy the server for minutes or exhaust its memory. Both engines
# walk every action of the schedule on every pipeline rank, pp x virtual stages x micro-batches
# (the largest shipped scenario, Llama-3-405B, has 16 x 4 x 16 = 1,024; the event engine
# simulates it in about 1.6 s, the closed form in 0.03 s); per-layer work lists grow with
# model.layers. Measured here: a 32 x 1 x 4,096 layout of GPT-3 175B took 6 s in the closed
# form and 113 s in the event engine, and model.layers = 10**9 exhausted the memory. The web
# app therefore runs the event engine up to 16x the largest shipped scenario, the closed form up
# to 128x, and models of up to 1,024 layers (the deepest preset has 126); the command line has
# the wider limits of clustersim.limits (budgets of about 10 s per step).
EVENT_WORK_LIMIT = 16_384
CLOSED_FORM_WORK_LIMIT = 131_072
MAX_LAYERS = 1_024


def check_work(sc: Scenario, engine: str) -> None:
    if sc.model.layers > MAX_LAYERS:
        raise InputError("model.layers", sc.model.layers,
                         f"at most {MAX_LAYERS:,} in the web app (`clustersim run` takes more)")
    par = sc.parallel
    work = par.pp * par.virtual_stages * par.num_micro_batches
    limit = EVENT_WORK_LIMIT if engine == "event" else CLOSED_FORM_WORK_LIMIT
    if work > limit:
        what = "the closed form for this layout: the web app runs the event engine" if engine == "event" else \
            "a smaller layout: the web app runs the closed form"
        raise InputError("engine", engine,
                         f"{what} up to pp x virtual_stages x micro-batches = {limit:,} (this layout: {par.pp} x "
                         f"{par.virtual_stages} x {par.num_micro_batches} = {work:,}); `clustersim run` takes "
                         "larger layouts, up to its own operation budgets (docs/hostile-input.md)")


def predict(body: dict[str, Any]) -> dict[str, Any]:
    """``{"scenario": {...}, "engine": "analytical" | "event", "timeline": bool}`` -> the page's data."""
    rq.check_keys(body, rq.PREDICT_KEYS, required=("scenario",))
    raw = rq.scenario_dict(body)
    engine = rq.engine_of(body)
    want_timeline = rq.flag(body, "timeline", default=engine == "event")
    if want_timeline and engine != "event":
        raise InputError("request.timeline", True, "false with the closed form (only the event engine records one)")
    started = time.perf_counter()
    sc = scenario_from_dict(raw)
    check_work(sc, engine)
    tdata = None
    if engine == "event":
        report, result = simulate_with_timeline(sc, record=want_timeline)
        if want_timeline:
            tdata = timeline_data(result.timeline.segments, report.step_time_s, pp=report.scenario.parallel.pp)
    else:
        report = estimate(sc)
    elapsed_s = time.perf_counter() - started
    rj = report.to_json()
    stages = stage_memory(report)
    sections = run_sections(rj, stages, tdata, None)
    if not want_timeline:
        sections.pop("timeline")
    return {"report": rj, "sections": sections, "charts": run_charts(rj, stages, tdata),
            "engine": engine, "compute_s": elapsed_s, "fits": bool(report.memory.fits), "yaml": scenario_yaml(raw)}


def scenario_text(body: dict[str, Any]) -> tuple[str, str]:
    """(file name, YAML) of the request's scenario after validating it as `clustersim run` would."""
    rq.check_keys(body, rq.SAVE_KEYS, required=("scenario",))
    raw = rq.scenario_dict(body)
    sc = scenario_from_dict(raw)
    stem = rq.safe_name(body["name"]) if "name" in body else _stem(sc.name)
    return f"{stem}.yaml", scenario_yaml(raw)


def _stem(name: str) -> str:
    """A file name stem from a scenario's free-text name."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name).strip("-.")
    stem = "-".join(part for part in stem.split("-") if part)[:64] or "scenario"
    return stem if rq.NAME_RE.match(stem) and ".." not in stem else "scenario"


def parse_yaml(body: dict[str, Any]) -> dict[str, Any]:
    """``{"yaml": TEXT}`` -> the scenario mapping, read with the limits of a scenario file."""
    rq.check_keys(body, rq.YAML_KEYS, required=("yaml",))
    text = body["yaml"]
    if not isinstance(text, str):
        raise InputError("request.yaml", type(text).__name__, "the text of a scenario YAML file")
    if len(text.encode("utf-8")) > MAX_YAML_BYTES:
        raise InputError("SCENARIO", "pasted YAML", f"at most {MAX_YAML_BYTES} bytes")
    data = load_yaml(text, "SCENARIO", "pasted YAML", "a YAML scenario")
    if not isinstance(data, dict):
        raise InputError("SCENARIO", "pasted YAML", "a YAML mapping with sections model, cluster, parallel, training")
    rq.scenario_dict({"scenario": data})
    scenario_from_dict(data)
    return {"scenario": data}


def save(body: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Write ``NAME.yaml`` and its report ``NAME.html`` (event engine) into ``out_dir``, nowhere else."""
    from clustersim.html.page import write_html
    from clustersim.output_file import atomic_write

    if "name" not in body:
        raise InputError("request.name", None, "this field is required")
    fname, text = scenario_text(body)
    raw = rq.scenario_dict(body)
    out_dir.mkdir(parents=True, exist_ok=True)
    yaml_path = rq.inside(out_dir, fname)
    html_path = rq.inside(out_dir, fname[: -len(".yaml")] + ".html")
    sc = scenario_from_dict(raw)
    check_work(sc, "event")
    report, result = simulate_with_timeline(sc, record=True)
    page = run_page(report, result.timeline, raw)   # both files made before either is written:
    data = text.encode("utf-8")                     # a failure leaves neither behind
    atomic_write(yaml_path, lambda f: f.write(data))
    write_html(html_path, page, option="name")
    return {"saved": [yaml_path.name, html_path.name]}


def shipped_scenarios(folder: Path | None) -> dict[str, dict[str, Any]]:
    """The embedded default and, in a source checkout, the scenarios/ folder (read at start-up)."""
    out: dict[str, dict[str, Any]] = {"default (llama3-8b on 2 DGX H100)": yaml.safe_load(DEFAULT_SCENARIO_YAML)}
    if folder is None or not folder.is_dir():
        return out
    from clustersim.scenario import read_scenario_dict

    for path in sorted(folder.glob("*.yaml")):
        try:
            data = read_scenario_dict(path)
            scenario_from_dict(data)
        except InputError:
            continue
        out[path.stem] = data
    return out
