"""Shared fixtures of the HTML report, web app and browser tests.

``reports``: the run, sweep and compare pages, written once per session through the command line
(in this process, serial executor). ``server``: `clustersim serve` started as a subprocess on a
free 127.0.0.1 port, stopped after the session. ``browser``: Debian's Chromium driven by
Playwright; it skips when either is missing, unless CLUSTERSIM_REQUIRE_BROWSER=1 (CI), where a
missing browser fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# The flags the project's browser runs use: no GPU, no QUIC, nothing phoning home.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SMALL = "scenarios/llama3_8b_h200x8.yaml"


def cli(*args: str) -> int:
    """Run `clustersim ARGS` in this process; the exit code."""
    from clustersim.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@dataclass(frozen=True)
class Reports:
    run: Path
    sweep: Path
    compare: Path


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    d = tmp_path_factory.mktemp("reports")
    out = Reports(d / "run.html", d / "sweep.html", d / "compare.html")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert cli("run", SMALL, "--html", str(out.run)) == 0
        assert cli("sweep", SMALL, "--executor", "serial", "--no-progress", "--top", "5", "--rerank", "3",
                   "--html", str(out.sweep)) == 0
        assert cli("compare", SMALL, "--clusters", "dgx-h100,hgx-h200", "--tokens", "100B", "--executor", "serial",
                   "--rerank", "2", "--html", str(out.compare)) == 0
    finally:
        os.chdir(cwd)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    url: str
    port: int
    out: Path
    proc: subprocess.Popen[str]

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
        """(status, JSON body) of one request; errors are answers too."""
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, {"raw": text.decode("utf-8", "replace")}

    def post(self, path: str, data: object) -> tuple[int, dict[str, object]]:
        return self.request("POST", path, json.dumps(data).encode(), {"Content-Type": "application/json"})


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("starlette", reason="the web app needs the serve extra: pip install '.[serve]'")
    pytest.importorskip("uvicorn", reason="the web app needs the serve extra: pip install '.[serve]'")
    out = tmp_path_factory.mktemp("serve") / "out"
    port = free_port()
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "clustersim", "serve", "--port", str(port), "--out", str(out)],
                                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, text=True)
    srv = Server(f"http://127.0.0.1:{port}", port, out, proc)
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"clustersim serve exited ({proc.returncode}): {log.read_text()}")
            with contextlib.suppress(OSError):
                if srv.request("GET", "/api/health")[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"clustersim serve did not answer within 90 s: {log.read_text()}")
            time.sleep(0.2)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install '.[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Playwright browser context on Debian's Chromium (fresh user-data-dir)."""
    missing = _browser_missing()
    if missing:
        if os.environ.get("CLUSTERSIM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CLUSTERSIM_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(f"browser tests need Playwright and Chromium: {missing}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 900}, accept_downloads=True)
        try:
            yield ctx
        finally:
            ctx.close()
