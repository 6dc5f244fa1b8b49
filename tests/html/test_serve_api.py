"""`clustersim serve` over HTTP: answers, the CLI's validation messages, and hostile requests
(malformed JSON, huge bodies, unknown keys, path-traversal names) answered 4xx, never 5xx, with
nothing written outside the output folder."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustersim.scenario import read_scenario_dict
from tests.html.conftest import ROOT, SMALL, Server, free_port

BAD_OVERRIDE = "parallel.micro_batch=3"


def small() -> dict:
    return read_scenario_dict(ROOT / SMALL)


def test_closed_form_and_event_engine_answer(server: Server) -> None:
    status, res = server.post("/api/predict", {"scenario": small()})
    assert status == 200 and res["engine"] == "analytical"
    assert set(res["charts"]) == {"chart-breakdown", "chart-memory"} and "timeline" not in res["sections"]
    status, ev = server.post("/api/predict", {"scenario": small(), "engine": "event", "timeline": True})
    assert status == 200 and "chart-timeline" in ev["charts"]
    assert ev["report"]["step_time_s"] >= res["report"]["step_time_s"] * (1 - 1e-9)  # contention only adds time
    assert yaml.safe_load(ev["yaml"]) == small()


def test_a_bad_value_gets_the_message_the_cli_prints(server: Server) -> None:
    cli = subprocess.run([sys.executable, "-m", "clustersim", "run", SMALL, "--set", BAD_OVERRIDE], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2
    sc = small()
    sc["parallel"]["micro_batch"] = 3
    status, res = server.post("/api/predict", {"scenario": sc})
    assert status == 400
    assert cli.stderr.strip() == f"error: {res['error']}"
    assert res["field"] == "parallel.micro_batch" and res["value"] == 3


def raw_request(server: Server, method: str, path: str, body: bytes = b"", headers: dict | None = None,
                chunked: bool = False) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        if chunked:
            conn.putrequest(method, path)
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            piece = b"x" * 65536
            try:
                for _ in range(16):  # 1 MiB in 64 KiB chunks; the server may close early
                    conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
                conn.send(b"0\r\n\r\n")
            except OSError:
                pass
        else:
            conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


JSON = {"Content-Type": "application/json"}
HOSTILE = [
    ("malformed JSON", "/api/predict", b'{"scenario": {', JSON, 400, "valid JSON"),
    ("not an object", "/api/predict", b"[1, 2]", JSON, 400, "a JSON object"),
    ("empty body", "/api/predict", b"", JSON, 400, "JSON object"),
    ("NaN", "/api/predict", b'{"scenario": {"model": {"preset": "llama3-8b"}, "cluster": {"nodes": NaN}}}', JSON, 400,
     "finite numbers"),
    # found 2026-11-27: each was a 500 with a traceback in the server's log
    ("1e400 (infinite)", "/api/predict", b'{"scenario": {"model": {"preset": "llama3-8b"}, "bogus": 1e400}}', JSON,
     400, "a finite number"),
    ("5,000-digit integer", "/api/predict", b'{"scenario": {"parallel": {"tp": ' + b"9" * 5000 + b"}}}", JSON, 400,
     "4,300 digits"),
    ("lone surrogate", "/api/predict", b'{"scenario": {"name": "\\ud800"}}', JSON, 400, "lone surrogates"),
    ("YAML !!binary", "/api/parse-yaml", b'{"yaml": "name: !!binary aGVsbG8=\\nmodel: {preset: llama3-8b}\\n"}',
     JSON, 400, "!!binary"),
    ("imbalance 1e308", "/api/predict",
     json.dumps({"scenario": {**small(), "model": {"preset": "mixtral-8x7b", "moe": {"imbalance": 1e308}}}}).encode(),
     JSON, 400, "model.moe.imbalance"),
    ("straggler 1e308x slower", "/api/predict", json.dumps({"engine": "event", "scenario": {
        **small(), "faults": {"stragglers": {"fraction": 0.5, "slowdown": 1e308}}}}).encode(), JSON, 400,
     "faults.stragglers.slowdown"),
    ("deep nesting", "/api/predict", b'{"scenario": ' + b"[" * 200 + b"]" * 200 + b"}", JSON, 400, "nesting"),
    ("binary", "/api/predict", b"\x00\x01\x02{}", JSON, 400, "binary"),
    ("huge declared body", "/api/predict", b"{" + b" " * 400_000 + b"}", JSON, 413, "at most 256 KiB"),
    ("unknown request key", "/api/predict", b'{"scenario": {}, "rm": "-rf"}', JSON, 400, "unknown key"),
    ("unknown scenario key", "/api/predict", json.dumps({"scenario": {**small(), "evil": 1}}).encode(), JSON, 400,
     "unknown key; allowed keys"),
    ("bad engine", "/api/predict", json.dumps({"scenario": small(), "engine": "gpu"}).encode(), JSON, 400,
     "analytical, event"),
    ("server file as HF config", "/api/predict",
     json.dumps({"scenario": {"model": {"hf_config": "/etc/passwd"}}}).encode(), JSON, 400, "not available in the web app"),
    ("form post", "/api/predict", b"scenario=1", {"Content-Type": "application/x-www-form-urlencoded"}, 415,
     "application/json"),
    ("traversal name on save", "/api/save", json.dumps({"scenario": small(), "name": "../../escape"}).encode(), JSON,
     400, "no folders"),
    ("absolute name on save", "/api/save", json.dumps({"scenario": small(), "name": "/tmp/escape"}).encode(), JSON,
     400, "no folders"),
    ("dot-dot name on save", "/api/save", json.dumps({"scenario": small(), "name": "a..b"}).encode(), JSON, 400,
     "no '..'"),
    ("event engine past the web app's limit", "/api/predict",
     json.dumps({"engine": "event", "scenario": {**read_scenario_dict(ROOT / "scenarios/gpt3_175b_a100x1024.yaml"),
                 "parallel": {"tp": 8, "pp": 32, "dp": 4, "micro_batch": 1, "global_batch": 16384}}}).encode(),
     JSON, 400, "the web app runs the event engine up to pp x virtual_stages x micro-batches"),
    ("a billion layers", "/api/predict",
     json.dumps({"scenario": {**small(), "model": {"preset": "llama3-8b", "layers": 10**9}}}).encode(), JSON, 400,
     "model.layers: got 1000000000"),  # the scenario schema's bound (clustersim.limits.MAX_LAYERS)
    ("bad YAML", "/api/parse-yaml", json.dumps({"yaml": "model: [unclosed"}).encode(), JSON, 400, "well-formed YAML"),
    ("YAML bomb", "/api/parse-yaml",
     json.dumps({"yaml": "a: &a [1]\n" + "".join(f"b{i}: *a\n" for i in range(40))}).encode(), JSON, 400, "aliases"),
]


@pytest.mark.parametrize(("what", "path", "body", "headers", "status", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_requests_get_a_clear_4xx(server: Server, what: str, path: str, body: bytes, headers: dict,
                                         status: int, message: str) -> None:
    got, text = raw_request(server, "POST", path, body, headers)
    assert got == status, text
    assert message in json.loads(text)["error"]


def test_chunked_bodies_are_bounded_too(server: Server) -> None:
    got, text = raw_request(server, "POST", "/api/predict", headers=JSON, chunked=True)
    assert got == 413 and b"at most 256 KiB" in text


def test_foreign_host_header_is_refused(server: Server) -> None:
    got, _ = raw_request(server, "GET", "/", headers={"Host": "attacker.example"})
    assert got == 400
    got, _ = raw_request(server, "GET", "/api/health", headers={"Host": f"localhost:{server.port}"})
    assert got == 200


@pytest.mark.parametrize("path", ["/files/..%2F..%2Fetc%2Fpasswd", "/files/../../etc/passwd", "/files/.hidden.yaml",
                                  "/files/passwd", "/files/x.py", "/files/%2Fetc%2Fpasswd", "/static/../pyproject.toml"])
def test_file_route_serves_nothing_outside_the_output_folder(server: Server, path: str) -> None:
    got, text = raw_request(server, "GET", path)
    assert 400 <= got < 500, text
    assert b"root:" not in text and b"[project]" not in text


def test_save_writes_only_into_the_output_folder_and_serves_it_back(server: Server) -> None:
    before = set(server.out.parent.iterdir())
    status, res = server.post("/api/save", {"scenario": small(), "name": "my-layout_1"})
    assert status == 200 and res["saved"] == ["my-layout_1.yaml", "my-layout_1.html"]
    assert sorted(p.name for p in server.out.iterdir()) == ["my-layout_1.html", "my-layout_1.yaml"]
    assert set(server.out.parent.iterdir()) == before | {server.out}
    got, text = raw_request(server, "GET", "/files/my-layout_1.yaml")
    assert got == 200 and yaml.safe_load(text) == small()
    status, res = server.post("/api/scenario.yaml", {"scenario": small()})
    assert status == 200 and res["filename"].endswith(".yaml") and "/" not in res["filename"]


def test_serve_refuses_a_busy_port_and_a_file_as_output_folder(server: Server, tmp_path: Path) -> None:
    busy = subprocess.run([sys.executable, "-m", "clustersim", "serve", "--port", str(server.port)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert busy.returncode == 2 and "--port" in busy.stderr and "a free port" in busy.stderr
    f = tmp_path / "file"
    f.write_text("x")
    bad = subprocess.run([sys.executable, "-m", "clustersim", "serve", "--port", str(free_port()), "--out", str(f)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--out" in bad.stderr
    # a folder where nothing can be created started, then "Save to folder" answered HTTP 500
    if Path("/proc").is_dir():
        proc = subprocess.run([sys.executable, "-m", "clustersim", "serve", "--port", str(free_port()), "--out",
                               "/proc/clustersim-x"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "--out" in proc.stderr and "pages can be saved" in proc.stderr


def test_listens_on_loopback_only_by_default(server: Server) -> None:
    tcp = Path("/proc/net/tcp")
    if not tcp.exists():
        pytest.skip("no /proc/net/tcp on this system")
    listening = [line.split()[1] for line in tcp.read_text().splitlines()[1:] if line.split()[3] == "0A"]
    ours = [addr for addr in listening if int(addr.split(":")[1], 16) == server.port]
    assert ours == [f"0100007F:{server.port:04X}"]  # 127.0.0.1 in /proc's little-endian hex


def test_unknown_paths_and_methods_answer_in_the_error_shape(server: Server) -> None:
    """404 and 405 carried only "error"; every other refusal names field, value and allowed."""
    got, text = raw_request(server, "GET", "/api/nope")
    body = json.loads(text)
    assert got == 404 and body["field"] == "path" and body["value"] == "/api/nope" and "/api/predict" in body["allowed"]
    got, text = raw_request(server, "GET", "/api/predict")
    body = json.loads(text)
    assert got == 405 and (body["field"], body["value"], body["allowed"]) == ("method", "GET", "POST")
    got, text = raw_request(server, "GET", "/files/never-saved.yaml")
    assert got == 404 and json.loads(text)["field"] == "name"
