"""clustersim.inputs: every malformed file ends in an InputError that names the file and the problem."""

from __future__ import annotations

import os

import pytest

from clustersim.errors import InputError
from clustersim.inputs import MAX_ALIASES, MAX_DEPTH, load_json, load_yaml, read_text, read_yaml_file


def write(tmp_path, data: bytes, name: str = "f.yaml"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_utf8_utf8_bom_and_utf16_with_bom_are_read(tmp_path):
    text = "name: ü\nmodel: {preset: llama3-8b}\n"
    for codec in ("utf-8", "utf-8-sig", "utf-16", "utf-32"):
        assert read_yaml_file(write(tmp_path, text.encode(codec)), "SCENARIO")["name"] == "ü"


def test_latin1_names_the_offset(tmp_path):
    with pytest.raises(InputError, match=r"offset 7.*|UTF-8"):
        read_text(write(tmp_path, "name: \xe9t\xe9\n".encode("latin-1")), "SCENARIO")


@pytest.mark.parametrize("data, pattern", [
    (b"", "empty"),
    (b"  \n\n", "empty"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
])
def test_empty_and_binary(tmp_path, data, pattern):
    with pytest.raises(InputError, match=pattern) as info:
        read_text(write(tmp_path, data), "SCENARIO")
    assert info.value.field == "SCENARIO"


def test_missing_directory_and_fifo(tmp_path):
    with pytest.raises(InputError, match="existing"):
        read_text(tmp_path / "nope.yaml", "SCENARIO")
    with pytest.raises(InputError, match="regular file"):
        read_text(tmp_path, "SCENARIO")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="regular file"):  # would block forever if opened
        read_text(fifo, "SCENARIO")


def test_size_limit_checked_before_reading(tmp_path):
    p = write(tmp_path, b"# " + b"x" * 2000 + b"\n")
    with pytest.raises(InputError, match="at most") as info:
        read_text(p, "SCENARIO", max_bytes=1000)
    assert "MiB" in info.value.allowed


def test_yaml_depth_aliases_and_non_finite():
    deep = "a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    with pytest.raises(InputError, match="nesting"):
        load_yaml(deep, "SCENARIO", "x")
    shallow = "a: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    assert load_yaml(shallow, "SCENARIO", "x")["a"] == [[]] if MAX_DEPTH == 4 else True
    refs = "a: &a [1]\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(InputError, match="aliases"):
        load_yaml(refs, "SCENARIO", "x")
    with pytest.raises(InputError) as info:
        load_yaml("model: {layers: .inf}", "SCENARIO", "x")
    assert "model.layers" in info.value.field
    with pytest.raises(InputError, match="well-formed"):
        load_yaml("a: [1, 2", "SCENARIO", "x")


def test_json_limits():
    with pytest.raises(InputError, match="finite"):
        load_json('{"a": NaN}', "F", "x")
    with pytest.raises(InputError, match="nesting"):
        load_json("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "F", "x")
    with pytest.raises(InputError, match="valid JSON"):
        load_json("{", "F", "x")
    assert load_json('{"a": [1, 2.5]}', "F", "x") == {"a": [1, 2.5]}


def test_a_key_given_twice_is_refused_naming_it(tmp_path):
    """PyYAML and json keep the last of a repeated key silently (``parallel: {tp: 2, tp: 4}`` ran
    at tp 4); YAML's merge key may still be overridden, as YAML allows."""
    with pytest.raises(InputError, match=r"'tp' at lines 2 and 3"):
        read_yaml_file(write(tmp_path, b"parallel:\n  tp: 2\n  tp: 4\n"), "SCENARIO")
    with pytest.raises(InputError, match=r"'hidden_size' is given twice"):
        load_json('{"hidden_size": 4096, "hidden_size": 2048}', "model.hf_config", "config.json")
    merged = read_yaml_file(write(tmp_path, b"base: &b {tp: 2, pp: 1}\nparallel: {<<: *b, tp: 4}\n"), "SCENARIO")
    assert merged["parallel"] == {"tp": 4, "pp": 1}
