"""`clustersim serve`: the Starlette application (uvicorn runs it; clustersim/cli/serve_cmd.py).

Routes (every POST takes a JSON object of at most ``MAX_BODY_BYTES`` with Content-Type
application/json; every error is JSON ``{"error": MESSAGE, "field", "value", "allowed"}`` with
the message the command line prints after ``error:``):

    GET  /                   the page
    GET  /api/health         {"ok": true}
    POST /api/predict        {"scenario": {...}, "engine": "analytical"|"event", "timeline": bool}
    POST /api/scenario.yaml  {"scenario": {...}, "name"?: STEM} -> {"filename", "yaml"} (validated first)
    POST /api/parse-yaml     {"yaml": TEXT} -> {"scenario": {...}}
    POST /api/save           {"scenario": {...}, "name": STEM} -> writes STEM.yaml and STEM.html in --out
    GET  /files/NAME         a file that /api/save wrote (NAME is checked; nothing else is served)

Bad input answers 400 (413 for a body over the limit, 415 for another Content-Type), never 500.
Only Host headers naming this machine are accepted (DNS-rebinding guard) unless the server was
bound to a non-loopback address on purpose.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from clustersim.errors import InputError
from clustersim.serve import predict as answers
from clustersim.serve import requests as rq

log = logging.getLogger("clustersim.serve")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
# At most two simulations at once: the machine's cores, and the event engine is CPU-bound.
_SIMULATIONS = 2
HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY"}
MEDIA = {".yaml": "application/x-yaml; charset=utf-8", ".html": "text/html; charset=utf-8"}


def _error(exc: InputError) -> JSONResponse:
    status = 413 if isinstance(exc, rq.TooLarge) else 415 if exc.field == "Content-Type" else 400
    value = exc.value if isinstance(exc.value, (str, int, float, bool, type(None))) else str(exc.value)
    if isinstance(value, float) and not math.isfinite(value):
        value = str(value)                                  # JSON has no inf or nan
    elif isinstance(value, str) and value.encode("utf-8", "replace").decode("utf-8") != value:
        value = ascii(value)                                # a lone surrogate: no UTF-8 answer can hold it
    return JSONResponse({"error": str(exc), "field": exc.field, "value": value, "allowed": exc.allowed},
                        status_code=status, headers=HEADERS)


async def _read_json(request: Request) -> dict[str, Any]:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise InputError("Content-Type", ctype or None, "application/json")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise InputError("Content-Length", declared, "a number of bytes")
        if int(declared) > rq.MAX_BODY_BYTES:
            raise rq.body_size_error(int(declared))
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():  # also bounds chunked bodies, which declare no length
        total += len(chunk)
        if total > rq.MAX_BODY_BYTES:
            raise rq.body_size_error(f"more than {rq.MAX_BODY_BYTES}")
        chunks.append(chunk)
    return rq.parse_json_body(b"".join(chunks))


Handler = Callable[[dict[str, Any]], Any]


def create_app(out_dir: Path, scenarios_dir: Path | None = None, allowed_hosts: list[str] | None = None) -> Starlette:
    """The app; ``out_dir`` is the only folder it writes to or serves files from."""
    from clustersim.frameworks import framework_names
    from clustersim.hardware.load import list_clusters
    from clustersim.serve.page import app_page
    from clustersim.workload.presets import MODEL_PRESETS

    out_dir = Path(out_dir)
    limit = asyncio.Semaphore(_SIMULATIONS)
    scenarios = answers.shipped_scenarios(scenarios_dir)
    page = app_page(sorted(MODEL_PRESETS), list_clusters(), scenarios, framework_names())
    # Warm up (imports, Bokeh, the cost caches) so that the first what-if answers as fast as the rest.
    answers.predict({"scenario": next(iter(scenarios.values())), "engine": "analytical"})

    def post(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                body = await _read_json(request)
                async with limit:
                    result = await run_in_threadpool(handler, body)
            except InputError as exc:
                return _error(exc)
            return JSONResponse(result, headers=HEADERS)
        return endpoint

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=HEADERS)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True}, headers=HEADERS)

    def scenario_yaml(body: dict[str, Any]) -> dict[str, Any]:
        filename, text = answers.scenario_text(body)
        return {"filename": filename, "yaml": text}

    async def files(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            rq.safe_name(name)
            if Path(name).suffix not in MEDIA:
                raise InputError("name", name, "a .yaml or .html file that /api/save wrote")
            listed = set(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else set()
            if name not in listed:
                return JSONResponse({"error": f"name: got {name!r}; allowed: a file in the output folder",
                                     "field": "name", "value": name, "allowed": "a file in the output folder"},
                                    status_code=404, headers=HEADERS)
            path = rq.inside(out_dir, name)
        except InputError as exc:
            return _error(exc)
        return Response(path.read_bytes(), media_type=MEDIA[path.suffix], headers=HEADERS)

    async def http_error(request: Request, exc: Exception) -> Response:
        """404 and 405 in the shape of every other error (docs/html.md, the web app): the field is the path or
        the method, the value what was asked, allowed what the app serves."""
        assert isinstance(exc, HTTPException)
        path, method = request.url.path, request.method
        if exc.status_code == 405:
            methods = sorted({m for r in routes if r.path == path for m in (r.methods or ()) if m != "HEAD"})
            field, value, allowed = "method", method, " or ".join(methods) or "GET or POST"
        else:
            field, value = "path", path
            allowed = "one of " + ", ".join(r.path for r in routes)
        return JSONResponse({"error": f"{method} {path}: {exc.detail}", "field": field, "value": value,
                             "allowed": allowed}, status_code=exc.status_code, headers=HEADERS)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("clustersim serve: unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server's log"},
                            status_code=500, headers=HEADERS)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/api/health", health, methods=["GET"]),
        Route("/api/predict", post(answers.predict), methods=["POST"]),
        Route("/api/scenario.yaml", post(scenario_yaml), methods=["POST"]),
        Route("/api/parse-yaml", post(answers.parse_yaml), methods=["POST"]),
        Route("/api/save", post(lambda body: answers.save(body, out_dir)), methods=["POST"]),
        Route("/files/{name}", files, methods=["GET"]),
    ]
    hosts = allowed_hosts if allowed_hosts is not None else list(LOOPBACK_HOSTS)
    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
                     exception_handlers={HTTPException: http_error, Exception: server_error})
