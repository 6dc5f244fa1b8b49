"""What the web app accepts from a request: bounded bodies, JSON through clustersim.inputs, known
keys only, scenarios validated exactly as the command line validates them, and file names that
cannot leave the output folder.

Every refusal is an ``InputError`` (the CLI's exit 2), which the app answers with HTTP 4xx and
the same one-line message the command line prints after ``error:``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.inputs import decode_text, load_json
from clustersim.units import KiB

# A scenario is a few hundred bytes of JSON; the YAML box of the page holds a scenario file.
# 256 KiB is generous and keeps a hostile body from costing more than a read.
MAX_BODY_BYTES = 256 * KiB
ENGINES = ("analytical", "event")
PREDICT_KEYS = ("scenario", "engine", "timeline")
SAVE_KEYS = ("scenario", "name")
YAML_KEYS = ("yaml",)
# Scenario keys that name a file on the server: a request must not make the server read one.
FILE_KEYS = (("model", "hf_config"),)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
NAME_ALLOWED = ("1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit "
                "(a plain file name, no folders, no '..')")


class TooLarge(InputError):
    """A body over MAX_BODY_BYTES (HTTP 413)."""


def body_size_error(size: int | str) -> TooLarge:
    return TooLarge("request", f"{size} bytes", f"a request body of at most {MAX_BODY_BYTES // KiB} KiB")


def parse_json_body(data: bytes) -> dict[str, Any]:
    """The request body as a JSON object (UTF-8, finite numbers, bounded nesting)."""
    if len(data) > MAX_BODY_BYTES:
        raise body_size_error(len(data))
    if not data.strip():
        raise InputError("request", "", "a JSON object as the request body")
    text = decode_text(data, "request", "request body", "a JSON request body")
    value = load_json(text, "request", "request body", "a JSON request body")
    if not isinstance(value, dict):
        raise InputError("request", type(value).__name__, "a JSON object")
    return value


def check_keys(body: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
    for key in body:
        if key not in allowed:
            raise InputError(f"request.{key}", body[key] if _short(body[key]) else "...",
                             f"unknown key; allowed keys: {', '.join(allowed)}", choices=allowed, key=str(key))
    for key in required:
        if key not in body:
            raise InputError(f"request.{key}", None, "this field is required")


def _short(value: Any) -> bool:
    return isinstance(value, (int, float, bool, type(None))) or (isinstance(value, str) and len(value) <= 80)


def scenario_dict(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's scenario, as the mapping a scenario file holds (validated later, by
    ``scenario_from_dict``), with the keys that would read server files refused."""
    sc = body.get("scenario")
    if not isinstance(sc, dict):
        raise InputError("request.scenario", type(sc).__name__ if sc is not None else None,
                         "a scenario as a JSON object (the mapping a scenario YAML file holds)")
    for section, key in FILE_KEYS:
        part = sc.get(section)
        if isinstance(part, dict) and key in part:
            raise InputError(f"{section}.{key}", part[key] if _short(part[key]) else "...",
                             "not available in the web app (it would read a file on the server); give the model "
                             "as model.preset or explicit fields, or use `clustersim run` on your machine")
    return sc


def engine_of(body: Mapping[str, Any]) -> str:
    engine = body.get("engine", "analytical")
    if engine not in ENGINES:
        raise InputError("request.engine", engine if _short(engine) else "...", ENGINES)
    return str(engine)


def flag(body: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"request.{key}", value if _short(value) else "...", "true or false")
    return value


def safe_name(name: Any) -> str:
    """A plain file name stem (NAME_RE), or InputError: never a path."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise InputError("name", name if _short(name) else "...", NAME_ALLOWED)
    return name


def inside(folder: Path, name: str) -> Path:
    """``folder / name`` after checking that it resolves inside ``folder`` (no links out)."""
    root = folder.resolve()
    target = (root / name).resolve()
    if target.parent != root:
        raise InputError("name", name, NAME_ALLOWED)
    return target
