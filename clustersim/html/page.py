"""The page shell: one self-contained HTML file, deterministic, that needs no network to open.

Everything is inline: the BokehJS bundle (read from the installed ``bokeh`` package through
``bokeh.resources.Resources(mode="inline")``), the CSS and the small embedding script in
``clustersim/html/static/``, and the charts as JSON items. A Content-Security-Policy forbids
every fetch (``default-src 'none'``), so the page cannot reach the network even by accident.
No timestamps, random ids or absolute paths go into the page.
"""

from __future__ import annotations

import functools
import html
import json
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from clustersim.output_file import atomic_write, check_output_path

HTML_SUFFIXES = (".html", ".htm")
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
              "img-src data: blob:; font-src data:")


@functools.cache
def static_text(name: str) -> str:
    """A file of clustersim/html/static (CSS, JS) as text."""
    return resources.files("clustersim.html").joinpath("static", name).read_text(encoding="utf-8")


@functools.cache
def bokeh_js() -> str:
    """BokehJS (only the core bundle: no widgets, tables or WebGL), as inline script text."""
    from bokeh.resources import Resources

    return "\n".join(Resources(mode="inline", components=["bokeh"], log_level="warn").js_raw)


def bokeh_version() -> str:
    import bokeh

    return str(bokeh.__version__)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no HTML comment openers)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_script(js: str) -> str:
    return "<script>" + js.replace("</script", "<\\/script") + "</script>"


def scenario_yaml(data: Mapping[str, Any] | None) -> str:
    """The scenario as the user gave it (overrides applied), in YAML."""
    if data is None:
        return ""
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def render_page(title: str, header_html: str, body_html: str, charts: Mapping[str, Any],
                csp: str = REPORT_CSP, extra_script: str = "") -> str:
    """The whole page: head (CSP, CSS, BokehJS), header, body, charts and the embedding script."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="clustersim (BokehJS {esc(bokeh_version())})">',
        f"<title>{esc(title)}</title>",
        "<style>" + static_text("report.css") + "</style>",
        inline_script(bokeh_js()),
        "</head><body>",
        f"<header>{header_html}</header>",
        f"<main>{body_html}</main>",
        f'<script type="application/json" id="clustersim-charts">{script_json(dict(charts))}</script>',
        inline_script(static_text("report.js")),
        extra_script,
        "</body></html>",
        "",
    ]
    return "\n".join(parts)


def check_html_path(path: str | os.PathLike[str], option: str = "--html",
                    inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Fail early (exit 2) on an HTML output that cannot be written, or is one of the command's
    ``inputs``, before any work is done."""
    return check_output_path(path, option, HTML_SUFFIXES, inputs)


def write_html(path: str | os.PathLike[str], text: str, option: str = "--html") -> None:
    """Write the page atomically (a complete file or none), UTF-8."""
    p = check_html_path(path, option)
    data = text.encode("utf-8")
    atomic_write(p, lambda f: f.write(data))
