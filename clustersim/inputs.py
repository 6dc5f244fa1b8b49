"""Reading the files a user hands over: one guarded path for every text, YAML and JSON input.

Every file clustersim reads (scenarios, hardware profiles, logs, traces, configs) goes through
``read_text`` and, for structured files, ``load_yaml`` / ``load_json``. What a user can get wrong
ends in an ``InputError`` (exit 2) that names the file, what was wrong and what is allowed,
before any expensive work starts:

* not a regular file (missing, a directory, a device or FIFO that would block);
* larger than the limit for its kind (checked with ``stat`` before reading: a 50 MB scenario is
  refused at once instead of being parsed for seconds);
* empty, or binary (a NUL byte in the first 8 KiB);
* not decodable: UTF-8 (with or without BOM) and UTF-16/32 *with* a BOM are read (Windows
  editors and PowerShell's ``>`` write UTF-16 with a BOM); anything else names the byte offset;
* YAML/JSON that nests deeper than ``MAX_DEPTH`` or uses more than ``MAX_ALIASES`` aliases
  (a "billion laughs" document would otherwise expand in later processing);
* NaN or infinity, text that is no Unicode (a lone surrogate) or a value that is no plain one
  (YAML's !!binary, dates, sets) anywhere in the data (``reject_non_plain`` names the dotted key).
"""

from __future__ import annotations

import filecmp
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from clustersim.errors import InputError
from clustersim.units import MiB

# Size limits per kind of file. Scenarios and profiles are hand-written YAML of a few KiB; a
# megabyte is generous. Logs and traces are machine-written and can be large.
MAX_YAML_BYTES = 4 * MiB
MAX_JSON_BYTES = 64 * MiB
MAX_LOG_BYTES = 1024 * MiB
MAX_DEPTH = 32        # nesting of mappings and sequences (real scenarios nest 3 deep)
MAX_ALIASES = 16      # YAML aliases (*name) per document (hand-written scenarios use none)
MAX_INT_DIGITS = sys.get_int_max_str_digits()   # Python's own bound on int() of text (4,300 by default)

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def read_bytes(path: str | os.PathLike[str], field: str, max_bytes: int, what: str) -> bytes:
    """The raw bytes of a regular file of at most ``max_bytes`` (InputError otherwise)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        hint = ""
        if not p.is_absolute() and p.parts[:1] == ("scenarios",):   # the README's examples, outside a checkout
            hint = ("; the example scenarios ship with the repository (its scenarios/ folder): run from a clone's "
                    "root, or write your own (docs/scenario.md)")
        raise InputError(field, str(path), f"a path to an existing file: {what} ({exc.strerror or exc}){hint}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(field, str(path), f"a regular file holding {what} (this is not a regular file)")
    if st.st_size > max_bytes:
        raise InputError(field, str(path), f"{what} of at most {max_bytes / MiB:g} MiB "
                                           f"(this file has {st.st_size / MiB:.1f} MiB)")
    try:
        with p.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(field, str(path), f"a readable {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # grew while we read it
        raise InputError(field, str(path), f"{what} of at most {max_bytes / MiB:g} MiB")
    return data


def decode_text(data: bytes, field: str, name: str, what: str) -> str:
    """Text from bytes: a BOM decides the encoding, else UTF-8; binary content is refused."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise InputError(field, name, f"{what} in {codec} as its byte-order mark says "
                                              f"(undecodable byte at offset {exc.start})") from None
    head = data[:8192]
    if b"\x00" in head:
        if _looks_like_utf16(head):
            raise InputError(field, name, f"{what} as UTF-8 text, or UTF-16 with a byte-order mark; this file "
                                          "looks like UTF-16 without one (save it as UTF-8)")
        raise InputError(field, name, f"{what} as text; this file looks binary (it holds NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(field, name, f"{what} encoded as UTF-8 (or UTF-16 with a byte-order mark); "
                                      f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8") from None


def _looks_like_utf16(head: bytes) -> bool:
    """Text saved as UTF-16 without a BOM: every other byte NUL (ASCII-range characters)."""
    even, odd = head[0::2], head[1::2]
    return len(head) >= 4 and (
        (odd.count(0) == len(odd) and 0 not in even) or (even.count(0) == len(even) and 0 not in odd))


def read_text(path: str | os.PathLike[str], field: str, what: str = "a text file",
              max_bytes: int = MAX_LOG_BYTES, allow_empty: bool = False) -> str:
    """Read a user's text file with every check of the module docstring."""
    text = decode_text(read_bytes(path, field, max_bytes, what), field, str(path), what)
    if not allow_empty and not text.strip():
        raise InputError(field, str(path), f"{what}; this file is empty")
    return text


def check_distinct_files(paths: Sequence[str | os.PathLike[str]], field: str) -> None:
    """Refuse a file given twice to ``field``: the same file (by path, symbolic or hard link) or a
    copy (the same bytes). A measurement given twice is no second measurement: `calibrate --log
    x.log --log x.log` counted as two runs and predicted each from the other with no error. Paths
    that are not there are left to the reader, which names them."""
    for i, path in enumerate(paths):
        for earlier in paths[:i]:
            same = _same_file(path, earlier)
            if same:
                raise InputError(field, os.fspath(path), f"each file once: this is {same} {os.fspath(earlier)}, "
                                                         "given before (a repeated measurement is no new evidence)")


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> str:
    """"the same file as" / "a copy of" when ``a`` is ``b`` or holds the same bytes, else ""."""
    try:
        if os.path.samefile(a, b):
            return "the same file as"
        sa, sb = os.stat(a), os.stat(b)
        if stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode) and sa.st_size == sb.st_size \
                and filecmp.cmp(a, b, shallow=False):
            return "a copy of"
    except (OSError, ValueError):
        pass
    return ""


def read_stdin_text(field: str, what: str = "text", max_bytes: int = MAX_LOG_BYTES) -> str:
    """Standard input (``-`` in place of a file) with the same checks as ``read_text``."""
    import sys
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(field, "-", f"{what} of at most {max_bytes / MiB:g} MiB on standard input")
    text = decode_text(data, field, "-", what)
    if not text.strip():
        raise InputError(field, "-", f"{what}; standard input is empty")
    return text


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader that counts nesting depth and aliases while composing the document."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _LimitError(f"at most {MAX_ALIASES} YAML aliases (*name)")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(f"nesting at most {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:  # noqa: D401 - PyYAML hook
        """A key given twice in one mapping (``parallel: {tp: 2, tp: 4}``) is refused: PyYAML keeps
        the last one silently. Keys merged in with ``<<`` may be overridden, as YAML allows."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _LimitError(f"each key once in a mapping ({key!r} at lines {seen[key]} and {line})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


    def construct_yaml_int(self, node: Any) -> int:  # noqa: D401 - PyYAML hook
        try:
            return super().construct_yaml_int(node)
        except ValueError:   # more digits than int() converts (sys.get_int_max_str_digits)
            raise _LimitError(f"numbers of at most {MAX_INT_DIGITS:,} digits") from None


_GuardedLoader.add_constructor("tag:yaml.org,2002:int", _GuardedLoader.construct_yaml_int)


def _json_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _LimitError(f"numbers of at most {MAX_INT_DIGITS:,} digits") from None


class _LimitError(Exception):
    pass


def _compose(text: str) -> Any:
    loader = _GuardedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_override_value(raw: str, item: str) -> Any:
    """The VALUE of ``--set KEY=VALUE`` parsed as YAML under the same limits as a file (depth,
    aliases, finite numbers); text that is not valid YAML stays the text itself."""
    if not raw.strip():
        return raw
    try:
        data = _compose(raw)
    except _LimitError as exc:
        raise InputError("--set", item, f"a VALUE with {exc}") from None
    except RecursionError:
        raise InputError("--set", item, f"a VALUE with nesting at most {MAX_DEPTH} levels deep") from None
    except yaml.YAMLError:
        return raw
    reject_non_plain(data, "--set", item)
    return data


def load_yaml(text: str, field: str, name: str, what: str = "YAML") -> Any:
    """Parse YAML text safely (no Python objects, bounded depth and aliases, finite numbers)."""
    try:
        data = _compose(text)
    except _LimitError as exc:
        raise InputError(field, name, f"{what} with {exc}") from None
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
            raise InputError(field, name, f"well-formed YAML: a tab character{where}; YAML indents and separates "
                                          "with spaces only (replace the tab with spaces)") from None
        raise InputError(field, name, f"well-formed YAML ({first[0] if first else 'parse error'}{where})") from None
    except RecursionError:
        raise InputError(field, name, f"{what} with nesting at most {MAX_DEPTH} levels deep") from None
    reject_non_plain(data, field, name)
    return data


_YAML_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # PyYAML's line breaks (reader.py)


def _char_at(text: str, line: int, column: int) -> str:
    """The character at a parser's mark (0-based line and column), or "" past the text."""
    lines = _YAML_BREAKS.split(text)
    return lines[line][column] if 0 <= line < len(lines) and 0 <= column < len(lines[line]) else ""


def load_json(text: str, field: str, name: str, what: str = "JSON") -> Any:
    """Parse JSON text with bounded depth and finite numbers only (JSON's NaN/Infinity refused)."""
    def no_constants(token: str) -> Any:
        raise _LimitError(f"finite numbers (found {token})")

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:   # json keeps the last of a repeated key silently
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise _LimitError(f"each key once in an object ({key!r} is given twice)")
            out[key] = value
        return out
    try:
        data = json.loads(text, parse_constant=no_constants, parse_int=_json_int, object_pairs_hook=once)
    except _LimitError as exc:
        raise InputError(field, name, f"{what} with {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(field, name, f"valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise InputError(field, name, f"{what} with nesting at most {MAX_DEPTH} levels deep") from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(field, name, f"{what} with nesting at most {MAX_DEPTH} levels deep")
    reject_non_plain(data, field, name)
    return data


def check_structure(data: Any, field: str, name: str, what: str) -> None:
    """The checks ``load_json`` applies, for data parsed elsewhere (TOML): bounded nesting and
    finite numbers (TOML has ``nan`` and ``inf`` literals)."""
    if _depth(data) > MAX_DEPTH:
        raise InputError(field, name, f"{what} with nesting at most {MAX_DEPTH} levels deep")
    reject_non_plain(data, field, name)


def read_yaml_file(path: str | os.PathLike[str], field: str, what: str = "a YAML file",
                   max_bytes: int = MAX_YAML_BYTES) -> Any:
    return load_yaml(read_text(path, field, what, max_bytes), field, str(path), what)


def read_json_file(path: str | os.PathLike[str], field: str, what: str = "a JSON file",
                   max_bytes: int = MAX_JSON_BYTES) -> Any:
    return load_json(read_text(path, field, what, max_bytes), field, str(path), what)


def _depth(data: Any) -> int:
    """Nesting depth of lists and dicts, iteratively (no recursion limit to hit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH:
            return d
        if isinstance(node, dict):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in node)
    return deepest


def _walk(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, leaf) pairs; a container reached twice (a YAML alias) is walked once."""
    stack: list[tuple[str, Any]] = [(prefix, data)]
    seen: set[int] = set()
    while stack:
        key, node = stack.pop()
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                continue
            seen.add(id(node))
        if isinstance(node, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(node))
        else:
            yield key, node


_PLAIN = (str, int, float, bool, type(None))


def reject_non_plain(data: Any, field: str, name: str) -> None:
    """InputError naming the first key whose value is NaN or infinite, text that is no Unicode
    (a lone surrogate: JSON's "\\ud800", which no UTF-8 output can hold), or no plain value (YAML's
    !!binary bytes, timestamps and sets: no scenario field is one, and no answer can print them)."""
    for key, value in _walk(data):
        where = f"{field} ({name}): {key or 'value'}"
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(where, value, "a finite number")
        if not isinstance(value, _PLAIN):
            raise InputError(where, type(value).__name__, "text, a number, true/false or null (YAML tags such as "
                             "!!binary or a date are not scenario values)")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(where, ascii(value)[:80], "text without lone surrogates (\\ud800-\\udfff "
                                 "alone is no character)") from None
