"""Append-only JSONL store of measurement records; nothing measured is lost.

Each record is one JSON object on one line, written with a single ``write`` of the whole
line, then ``flush`` and ``os.fsync``: a run killed at any moment leaves every earlier record
intact and at most one torn last line, which ``read_records`` skips. A rerun resumes by
skipping the cases whose ``(config, name)`` key is already stored.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.inputs import MAX_LOG_BYTES, decode_text, read_bytes

RECORDS_FILE = "records.jsonl"


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one record durably (one write, flush, fsync)."""
    line = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    # A torn line from a killed writer must not glue onto ours: start on a fresh line.
    needs_newline = p.exists() and p.stat().st_size > 0 and not _ends_with_newline(p)
    with p.open("a", encoding="utf-8") as f:
        f.write(("\n" if needs_newline else "") + line)
        f.flush()
        os.fsync(f.fileno())


def _ends_with_newline(p: Path) -> bool:
    with p.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


_OTHER_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)  # UTF-32-LE starts as UTF-16-LE


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete records in file order; torn or malformed lines are skipped."""
    p = Path(path)
    if not p.exists():
        return []
    what = "a validation records file (JSON lines, UTF-8)"
    data = read_bytes(p, "--out", MAX_LOG_BYTES, what)
    if data.startswith(_OTHER_BOMS):  # records are appended as UTF-8: a UTF-16/32 file would turn unreadable
        raise InputError("--out", str(p), f"{what}; this file is UTF-16 or UTF-32 (its byte-order mark says so)")
    text = decode_text(data, "--out", str(p), what)
    return list(_parse_lines(text.splitlines()))


def _parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            yield rec


def done_names(path: str | os.PathLike[str], config_id: str) -> set[str]:
    """Names of the cases already measured under ``config_id`` (for resuming)."""
    return {r["name"] for r in read_records(path) if r.get("config_id") == config_id and "name" in r}


def latest_by_name(records: Iterable[dict[str, Any]], config_id: str) -> dict[str, dict[str, Any]]:
    """The last record of each case name under ``config_id``, keyed by name (sorted)."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("config_id") == config_id and "name" in r:
            out[r["name"]] = r
    return dict(sorted(out.items()))
