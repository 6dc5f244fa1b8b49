"""Ctrl-C (SIGINT to a real subprocess) during `sweep` and `validate`: exit 130, one line on
stderr, no traceback, what was already measured kept and nothing half-written."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.hostile.harness import finish, start_subprocess


def _interrupt_when(proc, started: float, ready, timeout_s: float = 60.0) -> None:
    """SIGINT once ``ready()`` holds (the command is at work), or after ``timeout_s``."""
    while time.perf_counter() - started < timeout_s and proc.poll() is None and not ready():
        time.sleep(0.1)
    assert proc.poll() is None, "the command ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err, err[-2000:]
    assert lines and lines[-1].startswith("interrupted"), err[-500:]
    return lines[-1]


def test_sweep_ctrl_c_leaves_no_half_written_out(tmp_path: Path) -> None:
    out = tmp_path / "layouts.csv"
    # GPT-3 175B on 4,096 GPUs: hundreds of thousands of layouts, tens of seconds of work
    proc, started = start_subprocess(["sweep", "--gpus", "4096", "--set", "model.preset=gpt3-175b",
                                      "--executor", "serial", "--out", str(out)], cwd=tmp_path)
    _interrupt_when(proc, started, lambda: time.perf_counter() - started > 4.0)
    stopped = time.perf_counter()
    outcome = finish(proc, started, timeout_s=30)
    assert outcome.code == 130, (outcome.code, outcome.err[-1000:])
    assert time.perf_counter() - stopped < 10
    assert "sweep stopped" in _one_line(outcome.err)
    assert not outcome.out.strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a half-written --out or a temporary file was left"


def test_compare_ctrl_c_says_which_files_were_not_written(tmp_path: Path) -> None:
    """compare said only 'interrupted' where sweep names what it kept (docs/output.md: one line
    says what was kept)."""
    page = tmp_path / "compare.html"
    proc, started = start_subprocess(["compare", "--set", "model.preset=gpt3-175b", "--gpus", "4096", "--clusters",
                                      "dgx-a100,dgx-h100", "--executor", "serial", "--html", str(page)], cwd=tmp_path)
    _interrupt_when(proc, started, lambda: time.perf_counter() - started > 4.0)
    outcome = finish(proc, started, timeout_s=30)
    assert outcome.code == 130, (outcome.code, outcome.err[-1000:])
    line = _one_line(outcome.err)
    assert "compare stopped" in line and "compare.html not written" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_validate_ctrl_c_keeps_the_records_measured(tmp_path: Path) -> None:
    out = tmp_path / "val"
    records = out / "records.jsonl"
    proc, started = start_subprocess(["validate", "--ci", "--nprocs", "2", "--out", str(out), "--fresh"],
                                     cwd=tmp_path)
    _interrupt_when(proc, started, lambda: records.exists() and records.stat().st_size > 0, timeout_s=90)
    outcome = finish(proc, started, timeout_s=40)
    assert outcome.code == 130, (outcome.code, outcome.err[-1000:])
    _one_line(outcome.err)
    kept = [json.loads(line) for line in records.read_text().splitlines()]  # every line whole
    assert kept, "the records measured before Ctrl-C were lost"


def _ranks_of(out: Path) -> list[int]:
    """PIDs of validation ranks working on ``out``'s plan (from /proc; empty where /proc is absent)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"validation.worker" in args and str(out / "plan.json").encode() in args:
            pids.append(int(cmdline.parent.name))
    return pids


def test_validate_sigterm_stops_its_ranks_and_keeps_the_records(tmp_path: Path) -> None:
    """SIGTERM (a scheduler's kill, `timeout`) ended clustersim at once: its ranks ran on, orphaned,
    appending to the records that a rerun then read beside its own. Now as Ctrl-C: the ranks are
    stopped, the records kept, one line, exit 128 + 15."""
    out = tmp_path / "val"
    records = out / "records.jsonl"
    proc, started = start_subprocess(["validate", "--ci", "--nprocs", "2", "--out", str(out), "--fresh"],
                                     cwd=tmp_path)
    while time.perf_counter() - started < 90 and proc.poll() is None and not (
            records.exists() and records.stat().st_size > 0):
        time.sleep(0.1)
    assert proc.poll() is None, "validate ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    outcome = finish(proc, started, timeout_s=40)
    assert outcome.code == 128 + signal.SIGTERM, (outcome.code, outcome.err[-1000:])
    _one_line(outcome.err)
    assert [json.loads(line) for line in records.read_text().splitlines()]
    deadline = time.perf_counter() + 10
    while _ranks_of(out) and time.perf_counter() < deadline:
        time.sleep(0.2)
    assert _ranks_of(out) == [], "ranks outlived clustersim"
