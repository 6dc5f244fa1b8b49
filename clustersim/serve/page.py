"""The web app's single page: controls on the left, the run report's sections on the right.

The sections are the ones `clustersim run --html` writes (clustersim/html/run_page.py); the
page's script (clustersim/html/static/app.js) asks the server for them after every change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.html.page import esc, inline_script, render_page, script_json, static_text
from clustersim.html.run_page import SECTION_TITLES
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES
from clustersim.scenario import DEFAULT_CLUSTER_PRESET as DEFAULT_CLUSTER

APP_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
           "img-src data: blob:; font-src data:")
SECTIONS = ("summary", "interval", "timeline", "breakdown", "memory")
OPTIONAL_SECTIONS = ("energy",)  # shown only when the report carries them


def _options(values: Sequence[str], selected: str | None = None) -> str:
    return "".join(f'<option value="{esc(v)}"{" selected" if v == selected else ""}>{esc(v)}</option>' for v in values)


def _slider(name: str, label: str, lo: int, hi: int, hint: str) -> str:
    return (f'<div class="row"><label for="{name}">{esc(label)}</label><output id="{name}-out"></output></div>'
            f'<input type="range" id="{name}" name="{name}" min="{lo}" max="{hi}" step="1" title="{esc(hint)}">')


def controls_html(models: Sequence[str], clusters: Sequence[str], scenarios: Sequence[str],
                  frameworks: Sequence[str] = ()) -> str:
    return "".join([
        '<form class="controls" id="controls" onsubmit="return false">',
        '<label for="start">start from</label>',
        f'<select id="start">{_options(scenarios)}</select>',
        '<label for="model">model preset</label>',
        f'<select id="model"><option value="">(as in the scenario)</option>{_options(models)}</select>',
        '<label for="cluster">cluster preset</label>',
        f'<select id="cluster"><option value="">(as in the scenario)</option>{_options(clusters)}</select>',
        '<label for="nodes">nodes</label><input type="number" id="nodes" min="1" step="1">',
        '<label for="framework">framework</label>',
        f'<select id="framework"><option value="">(as in the scenario)</option>{_options(frameworks)}</select>',
        # the bounds below are the widest; the page narrows them to the cluster (app.js bound())
        _slider("tp", "tensor parallel (TP)", 0, 6, "powers of two, up to the GPUs of one scale-up domain"),
        _slider("pp", "pipeline parallel (PP)", 1, 128, "1 to 128 stages, at most the cluster's GPUs"),
        _slider("cp", "context parallel (CP)", 0, 14, "powers of two, up to the cluster's GPUs"),
        _slider("ep", "expert parallel (EP, MoE models)", 0, 14, "powers of two, up to the cluster's GPUs"),
        '<label><input type="checkbox" id="dp-auto" checked> DP takes the GPUs that TP x PP x CP leave</label>',
        _slider("dp", "data parallel (DP)", 0, 14, "powers of two, up to the cluster's GPUs"),
        _slider("mb", "micro-batch (sequences)", 0, 6, "powers of two, 1 to 64"),
        '<label for="global_batch">global batch (sequences)</label>'
        '<input type="number" id="global_batch" min="1" step="1">',
        '<label for="schedule">schedule</label>',
        f'<select id="schedule">{_options(SCHEDULES)}</select>',
        '<label for="virtual_stages">virtual stages (interleaved)</label>'
        '<input type="number" id="virtual_stages" min="1" step="1">',
        '<label for="zero_stage">ZeRO stage</label>',
        f'<select id="zero_stage">{_options(("0", "1", "2", "3"))}</select>',
        '<label for="recompute">recompute</label>',
        f'<select id="recompute">{_options(RECOMPUTE)}</select>',
        '<label><input type="checkbox" id="sequence_parallel"> sequence parallelism</label>',
        '<label>engine</label>',
        '<label><input type="radio" name="engine" id="engine-analytical" value="analytical" checked> '
        'closed form (fast; the timeline follows from the event engine)</label>',
        '<label><input type="radio" name="engine" id="engine-event" value="event"> event engine (link contention)</label>',
        '<div><button type="button" id="download">Download YAML</button>'
        '<button type="button" id="save">Save to folder</button></div>',
        '<label for="save-name">file name for "Save to folder"</label><input type="text" id="save-name" value="scenario">',
        '<div id="saved" class="note"></div>',
        '<label for="yaml">scenario YAML (edit or paste, then apply)</label>',
        '<textarea id="yaml" rows="14" spellcheck="false"></textarea>',
        '<button type="button" id="apply-yaml">Apply YAML</button>',
        "</form>",
    ])


def cluster_shapes(clusters: Sequence[str]) -> dict[str, dict[str, int]]:
    """GPUs per node and per scale-up domain of each cluster preset: the page bounds its sliders
    with them (TP within a domain, the other degrees within the cluster's GPUs)."""
    from clustersim.hardware.load import load_cluster

    out = {}
    for name in clusters:
        c = load_cluster(name)
        out[name] = {"gpus_per_node": c.gpus_per_node, "scale_up_domain": c.scale_up_domain or c.gpus_per_node}
    return out


def app_page(models: Sequence[str], clusters: Sequence[str], scenarios: Mapping[str, Any],
             frameworks: Sequence[str] = ()) -> str:
    names = list(scenarios)
    sections = "".join(f'<section id="sec-{s}"><h2>{esc(SECTION_TITLES[s])}</h2><div id="body-{s}"></div></section>'
                       for s in SECTIONS)
    sections += "".join(f'<section id="sec-{s}" data-optional="true" hidden><h2>{esc(SECTION_TITLES[s])}</h2>'
                        f'<div id="body-{s}"></div></section>' for s in OPTIONAL_SECTIONS)
    header = ("<h1>clustersim: what if?</h1><p>Pick a model, a cluster and a layout; every change is answered "
              "by the closed form first, then the event engine's timeline.</p>")
    body = (f'<div class="app">{controls_html(models, clusters, names, frameworks)}<div>'
            '<div id="error" role="alert" data-testid="error"></div><div id="status" data-testid="status"></div>'
            f"{sections}</div></div>")
    config = {"scenarios": dict(scenarios), "start": names[0] if names else None,
              "clusters": cluster_shapes(clusters), "default_cluster": DEFAULT_CLUSTER}
    extra = (f'<script type="application/json" id="clustersim-app">{script_json(config)}</script>'
             + inline_script(static_text("app.js")))
    return render_page("clustersim: what if?", header, body, {}, csp=APP_CSP, extra_script=extra)
